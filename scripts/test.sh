#!/usr/bin/env bash
# Install the project with its test and docs extras into .venv, then lint, type-check, build
# the documentation and run every test.
#   scripts/test.sh [pytest args]               on the broker at CRON_AMQP_URL (or localhost)
#   scripts/test.sh --rabbitmq 4.3 [pytest args]  the tests again on a private node of RabbitMQ
#       4.3 (or 4.0), fault tests' nodes included (needs root: builds and caches a Debian root
#       once: sid for 4.3, trixie for 4.0); --rabbitmq4 is --rabbitmq 4.0. WARREN_RABBITMQ=4.3
#       chooses the same without the option.
# The cluster tests (three more nodes, some minutes) run after the rest, in one process, where
# WARREN_TEST_CLUSTER=1.
set -euo pipefail
# shellcheck source=scripts/_env.sh
source "$(dirname "$0")/_env.sh"
cd "$ROOT"

ensure_venv "[test,docs]"
ensure_chromium || exit 1  # the dashboard's browser tests, on either broker
tests=("$VENV/bin/pytest" -n "${WARREN_TEST_PROCESSES:-3}" --dist worksteal -m "not cluster")

cluster_tests() {  # one process: a cluster is three nodes, one is enough on two cores
    if [ "${WARREN_TEST_CLUSTER:-0}" = 1 ]; then
        echo "== pytest -m cluster (RabbitMQ ${WARREN_RABBITMQ:-3})"
        "$VENV/bin/pytest" -m cluster "$@" || [ $? = 5 ]  # 5: the caller's args chose none
    fi
}

case "${1:-}" in
--rabbitmq4) shift; WARREN_RABBITMQ=4.0 ;;
--rabbitmq) WARREN_RABBITMQ="${2:?--rabbitmq needs a release: 3, 4.0 or 4.3}"; shift 2 ;;
esac
if [ "${WARREN_RABBITMQ:-3}" != 3 ]; then
    export WARREN_RABBITMQ
    echo "== pytest on RabbitMQ $WARREN_RABBITMQ"
    "$VENV/bin/python" scripts/private_node.py --rabbitmq "$WARREN_RABBITMQ" -- "${tests[@]}" "$@"
    cluster_tests "$@"
    exit 0
fi
default_url="$CRON_AMQP_URL"
if ! ensure_broker; then
    echo "the broker tests will try CRON_TEST_AMQP_URL or testcontainers" >&2
elif [ "$CRON_AMQP_URL" != "$default_url" ]; then
    export CRON_TEST_AMQP_URL="${CRON_TEST_AMQP_URL:-$CRON_AMQP_URL}"  # a node on its own port
fi
echo "== ruff";   "$VENV/bin/ruff" check .
echo "== mypy";   "$VENV/bin/mypy" -p warren_cron && "$VENV/bin/mypy" scripts tests examples
# --strict turns every warning (a broken link or anchor, a page left out of the nav) into a
# failure; -q would hide the warnings from the count, so the log is shown only on failure.
echo "== mkdocs"
if ! NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --site-dir "$VENV/site" \
    >"$VENV/mkdocs.log" 2>&1; then
    cat "$VENV/mkdocs.log" >&2
    echo "the documentation does not build (log above, also in $VENV/mkdocs.log)" >&2
    exit 1
fi
# Most tests wait on the broker, not the CPU: three processes keep two cores busy, and
# work-stealing keeps the long fault tests from queueing behind one another.
echo "== pytest"
"${tests[@]}" "$@"
cluster_tests "$@"
