"""Run the ``warren`` command from a process that imported it once, forked for each run.

The tests run the command hundreds of times; each fresh start spends most of a CPU-second
importing it, and CI's two cores are busy throughout. A server per test process (started on
first use, a child of that process) imports every subcommand's module, then forks a child
for each run: the child takes the caller's argv, environment, directory and standard
streams, runs ``warren_cron.cli.main.main`` as the console script would, and exits with its
code. What the command prints and returns is what a fresh ``warren`` would; only the start
is shared.

    python -m tests.warm SOCKET    the server (started by ``run``, not by hand)
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import orjson

#: A request: argv, environment and directory as JSON, the three streams as passed fds.
_MAX_REQUEST = 1 << 20
#: How often the server looks whether the test process that started it is still there.
PARENT_CHECK_SECONDS = 5.0
_lock = threading.Lock()
_server: tuple[subprocess.Popen[bytes], str] | None = None


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | str,
    stdin: str = "",
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``warren ARGV`` to completion, as ``subprocess.run(..., capture_output=True,
    text=True)`` gives it; a run past ``timeout`` is killed and raises ``TimeoutExpired``."""
    with contextlib.ExitStack() as files:
        streams = [files.enter_context(tempfile.TemporaryFile()) for _ in range(3)]
        streams[0].write(stdin.encode())
        streams[0].seek(0)
        code = _ask(list(argv), dict(env), str(cwd), [f.fileno() for f in streams], timeout)
        out, err = (_text(f) for f in streams[1:])
    return subprocess.CompletedProcess(["warren", *argv], code, out, err)


def _text(file: IO[bytes]) -> str:
    """What ``text=True`` makes of a captured stream (universal newlines)."""
    file.seek(0)
    return file.read().decode().replace("\r\n", "\n").replace("\r", "\n")


def _ask(argv: list[str], env: dict[str, str], cwd: str, fds: list[int], timeout: float) -> int:
    request = orjson.dumps({"argv": argv, "env": env, "cwd": cwd})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(_address())
        socket.send_fds(conn, [request], fds)
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(timeout)
        with conn.makefile("rb") as answers:
            pid: int | None = None
            try:
                pid = int(answers.readline())
                return int(answers.readline())
            except TimeoutError:
                # Past the timeout, with or without the child's pid: as subprocess.run says it.
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(["warren", *argv], timeout) from None


def _address() -> str:
    """The socket of this process's server, started on first use."""
    global _server  # one server per test process
    with _lock:
        if _server is None or _server[0].poll() is not None:
            path = os.path.join(tempfile.mkdtemp(prefix="warren-warm-"), "socket")
            ready = subprocess.Popen(
                [sys.executable, "-m", "tests.warm", path],
                cwd=Path(__file__).resolve().parent.parent,
                stdout=subprocess.PIPE,
            )
            assert ready.stdout is not None
            if ready.stdout.readline().strip() != b"ready":
                raise RuntimeError(f"the warm warren server did not start (exit {ready.wait()})")
            _server = (ready, path)
            atexit.register(_stop, ready)
        return _server[1]


def _stop(server: subprocess.Popen[bytes]) -> None:
    server.kill()
    server.wait()
    if server.stdout is not None:
        server.stdout.close()


def serve(path: str) -> None:
    """Import every subcommand, then fork a child for each request on ``path``."""
    from warren_cron.cli.main import SUBCOMMANDS

    for sub in SUBCOMMANDS.values():
        importlib.import_module(sub.module)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(64)
        print("ready", flush=True)
        parent = os.getppid()
        # A test process that died without its exit handlers leaves no server behind.
        listener.settimeout(PARENT_CHECK_SECONDS)
        while os.getppid() == parent:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            request, fds, _flags, _ = socket.recv_fds(conn, _MAX_REQUEST, 3)
            while more := conn.recv(_MAX_REQUEST):
                request += more
            pid = os.fork()
            if pid == 0:
                listener.close()
                conn.close()
                _child(orjson.loads(request), fds)
            for fd in fds:
                os.close(fd)
            # The answer comes from a thread of the server: the next request is not held up.
            threading.Thread(target=_answer, args=(conn, pid), daemon=True).start()


def _answer(conn: socket.socket, pid: int) -> None:
    with conn:
        _tell(conn, f"{pid}\n")
        _, status = os.waitpid(pid, 0)  # reaped even when nobody is left to tell
        _tell(conn, f"{os.waitstatus_to_exitcode(status)}\n")


def _tell(conn: socket.socket, line: str) -> None:
    # A caller past its timeout has closed its end: nobody is left to tell.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        conn.sendall(line.encode())


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """Become ``warren ARGV`` in the caller's environment; raises ``SystemExit``."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update(request["env"])
        argv: list[str] = request["argv"]
        sys.argv = ["warren", *argv]
        from warren_cron.cli.main import main

        code = main(argv)
    except SystemExit as exiting:
        code = exiting.code if isinstance(exiting.code, int) else 1
    except BaseException:
        traceback.print_exc()
    # Ends as the console script does (``sys.exit``), so what a command left to exit
    # handlers (a trace exporter's last batch) still happens.
    raise SystemExit(code)


if __name__ == "__main__":
    serve(sys.argv[1])
