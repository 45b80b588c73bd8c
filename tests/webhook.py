"""A real local HTTP endpoint for tests: answers with scripted statuses and records requests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson


@dataclass
class Endpoint:
    """What the endpoint answers and what it received."""

    statuses: list[int] = field(default_factory=lambda: [200])
    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    url: str = ""

    def next_status(self) -> int:
        """The scripted status for this request; the last one repeats."""
        index = min(len(self.requests) - 1, len(self.statuses) - 1)
        return self.statuses[index]


@contextmanager
def serve(endpoint: Endpoint) -> Iterator[Endpoint]:
    """Run the endpoint on a free loopback port for the duration of the block."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            endpoint.requests.append((self.path, dict(self.headers.items()), body))
            status = endpoint.next_status()
            self.send_response(status)
            self.send_header("Content-Length", "9")
            self.end_headers()
            self.wfile.write(b"not here!")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    endpoint.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()


def bodies(endpoint: Endpoint, delivered_from: int = 0) -> list[dict[str, Any]]:
    """JSON bodies the webhook received, from request number ``delivered_from`` on."""
    return [orjson.loads(body) for _, _, body in endpoint.requests[delivered_from:]]


def conditions(endpoint: Endpoint, name: str) -> list[str]:
    """The statuses (firing, resolved) the alerts received so far gave condition ``name``."""
    return [c["status"] for b in bodies(endpoint) for c in b["conditions"] if c["name"] == name]
