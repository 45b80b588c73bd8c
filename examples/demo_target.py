"""A small webhook target for the docker compose demo: succeeds, fails sometimes, or is gone.

``python -m examples.demo_target`` listens on ``DEMO_TARGET_PORT`` (8080):
``/ok`` answers 200, ``/flaky`` 503 half the time, ``/gone`` 404, anything else 404.
"""

from __future__ import annotations

import os
import random
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Target(BaseHTTPRequestHandler):
    """Answers by path; logs one line per request so the demo shows what workers did."""

    def do_POST(self) -> None:
        """Answer a webhook call."""
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/ok":
            status = 200
        elif self.path == "/flaky":
            status = 503 if random.random() < 0.5 else 200  # noqa: S311 - a demo coin toss
        else:
            status = 404
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()
        run_id = self.headers.get("X-Cron-Run-Id")
        print(
            f"{self.path} -> {status} run={run_id} attempt={self.headers.get('X-Cron-Attempt')}",
            flush=True,
        )

    def log_message(self, format: str, *args: object) -> None:
        """The line above says more than the default access log."""


def main() -> None:
    """Serve until stopped."""
    port = int(os.environ.get("DEMO_TARGET_PORT", "8080"))
    ThreadingHTTPServer(("0.0.0.0", port), Target).serve_forever()  # noqa: S104 - a container


if __name__ == "__main__":
    main()
