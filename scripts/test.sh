#!/usr/bin/env bash
# Install the project with its test extras into .venv, then lint, type-check and run every test.
set -euo pipefail
# shellcheck source=scripts/_env.sh
source "$(dirname "$0")/_env.sh"
cd "$ROOT"

ensure_venv "[test]"
if ! ensure_broker; then
    echo "the broker tests will try CRON_TEST_AMQP_URL or testcontainers" >&2
fi
echo "== ruff";   "$VENV/bin/ruff" check .
echo "== mypy";   "$VENV/bin/mypy" topology worker scheduler scripts tests examples
# Most tests wait on the broker, not the CPU: three processes keep two cores busy, and
# work-stealing keeps the long fault tests from queueing behind one another.
echo "== pytest"; "$VENV/bin/pytest" -n "${WARREN_TEST_PROCESSES:-3}" --dist worksteal "$@"
