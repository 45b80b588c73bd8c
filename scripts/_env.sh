# Shared by demo.sh and test.sh: a virtualenv with the project, and a reachable broker.
# shellcheck shell=bash

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
export CRON_AMQP_URL="${CRON_AMQP_URL:-amqp://guest:guest@localhost:5672/}"

pick_python() {
    for candidate in python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "need Python 3.11 or newer on PATH" >&2
    return 1
}

ensure_venv() {  # $1: pip extras, e.g. "[test]" or ""
    if [ ! -x "$VENV/bin/python" ]; then
        echo "creating .venv"
        "$(pick_python)" -m venv "$VENV"
    fi
    # Build-backend chatter goes to a log; it is shown only when the install fails. The strict
    # editable mode links the mapped folders into one warren_cron tree that mypy reads too.
    local log="$VENV/install.log" key
    key="$(install_key "$1")"
    if [ -f "$VENV/installed-$key" ]; then
        return 0
    fi
    echo "installing warren$1 and its dependencies into .venv with pip (log: .venv/install.log) ..."
    local started=$SECONDS
    if ! { "$VENV/bin/python" -m pip install --disable-pip-version-check --upgrade pip &&
        "$VENV/bin/python" -m pip install --disable-pip-version-check \
            --config-settings editable_mode=strict -e "$ROOT$1"; } >"$log" 2>&1; then
        cat "$log" >&2
        echo "installing the project into $VENV failed (log above, also in $log)" >&2
        return 1
    fi
    echo "  done in $((SECONDS - started)) s"
    rm -f "$VENV"/installed-*
    touch "$VENV/installed-$key"
    [ -n "$1" ] || return 0
    touch "$VENV/installed-$(install_key "")"  # the extras' install is the base one too
}

# What the strict editable install depends on: the extras, pyproject.toml and the list of the
# package's files (a file added or moved needs a new install; an edited one does not). Running
# pip only when it changed keeps a second run fast, and keeps processes already running from
# seeing the package's link tree emptied while pip rebuilds it.
install_key() {  # $1: pip extras
    "$VENV/bin/python" - "$ROOT" "$1" <<'PY'
import hashlib, sys
from pathlib import Path
root = Path(sys.argv[1])
files = sorted(
    str(path.relative_to(root))
    for folder in ("topology", "worker", "scheduler")
    for path in (root / folder).rglob("*")
    if path.is_file() and "__pycache__" not in path.parts
)
text = "\n".join([sys.argv[2], (root / "pyproject.toml").read_text(), *files])
print(hashlib.sha256(text.encode()).hexdigest()[:16])
PY
}

# The broker at CRON_AMQP_URL; when none answers and the URL is a guest login on this host, one
# brought up here (Docker, the installed or apt-installed rabbitmq-server, or a node of the
# project's own in .rabbitmq/): see warren_cron.cli.broker_up. CRON_AMQP_URL then names the
# broker that answers, and BROKER_STOP how to stop it when this run started it.
BROKER_STOP=""
ensure_broker() {
    local found
    found="$("$VENV/bin/python" -m warren_cron.cli.broker_up --project "$ROOT" "$CRON_AMQP_URL")" ||
        return 1
    CRON_AMQP_URL="$(sed -n 1p <<<"$found")"
    BROKER_STOP="$(sed -n 2p <<<"$found")"
    export CRON_AMQP_URL
}

# The dashboard's browser tests drive Debian's Chromium (Playwright cannot download its own
# browser everywhere): install it where we may, else say what is missing and fail.
ensure_chromium() {
    [ -x /usr/bin/chromium ] && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing chromium for the dashboard's browser tests (apt-get)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
        return
    fi
    echo "the dashboard's browser tests need Chromium at /usr/bin/chromium:" >&2
    echo "  sudo apt-get install -y chromium   (Debian, Ubuntu), then run scripts/test.sh again" >&2
    return 1
}

# The hot path's guard (scripts/instructions_guard.py) counts instructions under valgrind's
# callgrind: install it where we may, else say what is missing and fail.
ensure_valgrind() {
    command -v valgrind >/dev/null && return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing valgrind for the instructions guard (apt-get)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
        return
    fi
    echo "the instructions guard needs valgrind: sudo apt-get install -y valgrind" >&2
    return 1
}
