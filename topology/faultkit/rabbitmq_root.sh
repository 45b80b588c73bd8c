#!/usr/bin/env bash
# A newer RabbitMQ beside the machine's own broker: a Debian root with rabbitmq-server, built
# once with debootstrap and cached outside the clone, nodes run in a chroot on their own ports.
#
#   rabbitmq_root.sh RELEASE root      build the root if missing (needs root), mount /proc and
#                                      /dev in it, print its path
#   rabbitmq_root.sh RELEASE unmount   unmount them again (when no node of it runs any more)
#
# RELEASE is 4.0 (Debian trixie: rabbitmq-server 4.0.5, Erlang 27) or 4.3 (Debian sid:
# 4.3.x, Erlang 29). warren_cron.faultkit.install asks for the root (WARREN_RABBITMQ=4.0 or
# 4.3); nodes are started and stopped by warren_cron.faultkit.private_broker.
#
# WARREN_RABBITMQ4_ROOT (4.0, default /var/cache/warren/rabbitmq4) and WARREN_RABBITMQ43_ROOT
# (4.3, default /var/cache/warren/rabbitmq43) choose the cache directories.
set -euo pipefail

case "${1:-}" in
4 | 4.0) SUITE=trixie ROOT="${WARREN_RABBITMQ4_ROOT:-/var/cache/warren/rabbitmq4}" ;;
4.3) SUITE=sid ROOT="${WARREN_RABBITMQ43_ROOT:-/var/cache/warren/rabbitmq43}" ;;
*)
    echo "usage: $0 4.0|4.3 root|unmount   (got release '${1:-}': give 4.0 or 4.3)" >&2
    exit 2
    ;;
esac

mirror() {  # the Debian mirror apt already uses: the machine may reach no other
    local uri
    uri="$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' |
        grep -v security | head -n 1 || true)"
    echo "${uri:-http://deb.debian.org/debian}"
}

build_root() {
    if ! command -v debootstrap >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    fi
    local partial="$ROOT.partial"
    rm -rf "$partial"
    echo "building the RabbitMQ $1 root ($SUITE) in $ROOT (once; one or two minutes)" >&2
    debootstrap --variant=minbase --include=rabbitmq-server "$SUITE" "$partial" "$(mirror)" \
        >"$partial.log" 2>&1 || { tail -n 30 "$partial.log" >&2; return 1; }
    # sid's minimal root has no /etc/hosts: without it the node cannot resolve localhost.
    [ -s "$partial/etc/hosts" ] || cp /etc/hosts "$partial/etc/hosts"
    mkdir -p "$partial/warren"  # each node's data, logs and cookie: /warren/<node>
    mv "$partial" "$ROOT"
}

mount_root() {  # Erlang reads /proc and /dev; both are bind mounts, shared by every node
    mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
    mountpoint -q "$ROOT/dev" || mount --bind /dev "$ROOT/dev"
}

ensure_root() {
    mkdir -p "$(dirname "$ROOT")"
    # Parallel test processes may all ask at once: one builds, the others wait for it.
    exec 9>"$ROOT.lock"
    flock 9
    [ -x "$ROOT/usr/lib/rabbitmq/bin/rabbitmq-server" ] || build_root "$1"
    [ -s "$ROOT/etc/hosts" ] || cp /etc/hosts "$ROOT/etc/hosts"
    mount_root
    flock -u 9
}

case "${2:-}" in
root) ensure_root "$1"; echo "$ROOT" ;;
unmount)
    for dir in proc dev; do
        if mountpoint -q "$ROOT/$dir"; then umount "$ROOT/$dir"; fi
    done
    ;;
*)
    echo "usage: $0 4.0|4.3 root|unmount   (nodes are started by warren_cron.faultkit.private_broker)" >&2
    exit 2
    ;;
esac
