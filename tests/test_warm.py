"""The tests' command server (``tests/warm.py``) answers as the console script would, and a
run past its timeout ends as ``subprocess.run`` ends one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import warm

ROOT = Path(__file__).resolve().parent.parent
WARREN = str(Path(sys.executable).with_name("warren"))


def test_a_forked_run_prints_and_exits_as_the_console_script() -> None:
    """``warren schedules --help`` and a bad subcommand: same output and exit code both ways."""
    env = dict(os.environ)
    for argv in (["schedules", "--help"], ["no-such-command"]):
        forked = warm.run(argv, env=env, cwd=ROOT)
        fresh = subprocess.run([WARREN, *argv], env=env, cwd=ROOT, capture_output=True, text=True)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            fresh.returncode,
            fresh.stdout,
            fresh.stderr,
        )


def test_a_run_past_its_timeout_raises_timeout_expired() -> None:
    """A worker whose broker accepts the connection and never answers waits on; after 2 s
    the run is killed and ``TimeoutExpired`` raised, as ``subprocess.run`` would."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        env = {**os.environ, "CRON_AMQP_URL": f"amqp://guest:guest@127.0.0.1:{port}/"}
        began = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            warm.run(["worker"], env=env, cwd=ROOT, timeout=2)
    assert time.monotonic() - began < 30
