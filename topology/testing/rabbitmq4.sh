#!/usr/bin/env bash
# RabbitMQ 4.0.x beside the machine's own broker: a Debian trixie root with rabbitmq-server,
# built once with debootstrap and cached outside the clone, nodes run in a chroot on their
# own ports.
#
#   rabbitmq4.sh root              build the root if missing (needs root), mount /proc and
#                                  /dev in it, print its path
#   rabbitmq4.sh unmount           unmount them again (when no 4.x node runs any more)
#
# warren_cron.testing.install asks for the root (WARREN_RABBITMQ=4); nodes are started and
# stopped by warren_cron.testing.private_broker.
#
# WARREN_RABBITMQ4_ROOT chooses the cache directory (default /var/cache/warren/rabbitmq4).
set -euo pipefail

ROOT4="${WARREN_RABBITMQ4_ROOT:-/var/cache/warren/rabbitmq4}"
SUITE=trixie

mirror() {  # the Debian mirror apt already uses: the machine may reach no other
    local uri
    uri="$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' |
        grep -v security | head -n 1 || true)"
    echo "${uri:-http://deb.debian.org/debian}"
}

build_root() {
    command -v debootstrap >/dev/null || apt-get install -y debootstrap >/dev/null
    local partial="$ROOT4.partial"
    rm -rf "$partial"
    echo "building the RabbitMQ 4 root in $ROOT4 (once; about a minute)" >&2
    debootstrap --variant=minbase --include=rabbitmq-server "$SUITE" "$partial" "$(mirror)" \
        >"$partial.log" 2>&1 || { tail -n 30 "$partial.log" >&2; return 1; }
    mkdir -p "$partial/warren"  # each node's data, logs and cookie: /warren/<node>
    mv "$partial" "$ROOT4"
}

mount_root() {  # Erlang reads /proc and /dev; both are bind mounts, shared by every node
    mountpoint -q "$ROOT4/proc" || mount -t proc proc "$ROOT4/proc"
    mountpoint -q "$ROOT4/dev" || mount --bind /dev "$ROOT4/dev"
}

ensure_root() {
    mkdir -p "$(dirname "$ROOT4")"
    # Parallel test processes may all ask at once: one builds, the others wait for it.
    exec 9>"$ROOT4.lock"
    flock 9
    [ -x "$ROOT4/usr/lib/rabbitmq/bin/rabbitmq-server" ] || build_root
    mount_root
    flock -u 9
}

case "${1:-}" in
root) ensure_root; echo "$ROOT4" ;;
unmount)
    for dir in proc dev; do
        if mountpoint -q "$ROOT4/$dir"; then umount "$ROOT4/$dir"; fi
    done
    ;;
*)
    echo "usage: $0 root | unmount   (nodes are started by scripts/chaoslib/private_broker.py)" >&2
    exit 2
    ;;
esac
