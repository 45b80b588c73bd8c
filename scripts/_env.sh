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
        "$(pick_python)" -m venv "$VENV"
    fi
    # Build-backend chatter goes to a log; it is shown only when the install fails. The strict
    # editable mode links the mapped folders into one warren_cron tree that mypy reads too.
    local log="$VENV/install.log"
    echo "installing warren$1 into .venv (log: .venv/install.log)"
    if ! { "$VENV/bin/python" -m pip install --disable-pip-version-check --upgrade pip &&
        "$VENV/bin/python" -m pip install --disable-pip-version-check \
            --config-settings editable_mode=strict -e "$ROOT$1"; } >"$log" 2>&1; then
        cat "$log" >&2
        echo "installing the project into $VENV failed (log above, also in $log)" >&2
        return 1
    fi
}

broker_up() {
    "$VENV/bin/python" - "$CRON_AMQP_URL" <<'PY'
import socket, sys
from urllib.parse import urlsplit
url = urlsplit(sys.argv[1])
try:
    socket.create_connection((url.hostname or "localhost", url.port or 5672), 2).close()
except OSError:
    sys.exit(1)
PY
}

ensure_broker() {
    if broker_up; then
        return 0
    fi
    if command -v rabbitmq-server >/dev/null; then
        echo "RabbitMQ is not answering at the broker URL; starting the local rabbitmq-server"
        rabbitmq-server -detached >/dev/null 2>&1 || true
        for _ in $(seq 1 60); do
            if broker_up; then
                sleep 2  # the port opens before the node accepts logins
                return 0
            fi
            sleep 1
        done
    fi
    echo "no RabbitMQ reachable at CRON_AMQP_URL." >&2
    echo "start one with:  docker compose up -d rabbitmq   (or install rabbitmq-server)" >&2
    return 1
}
