#!/usr/bin/env bash
# Set up .venv, make sure RabbitMQ answers (bringing one up on this machine if need be: see
# docs/bare-machine.md), then run the main job end to end.
set -euo pipefail
# shellcheck source=scripts/_env.sh
source "$(dirname "$0")/_env.sh"
cd "$ROOT"

ensure_venv ""
ensure_broker
status=0
"$VENV/bin/python" scripts/demo.py "$@" || status=$?
if [ -n "$BROKER_STOP" ]; then
    echo "The RabbitMQ started for the demo is still running (CRON_AMQP_URL=$CRON_AMQP_URL)."
    echo "Stop it with:  $BROKER_STOP"
fi
exit "$status"
