#!/usr/bin/env bash
# Set up .venv, make sure RabbitMQ answers, then run the main job end to end.
set -euo pipefail
# shellcheck source=scripts/_env.sh
source "$(dirname "$0")/_env.sh"
cd "$ROOT"

ensure_venv ""
ensure_broker
exec "$VENV/bin/python" scripts/demo.py "$@"
