"""A real local HTTP endpoint for tests: answers with scripted statuses and records requests."""

from __future__ import annotations

import threading
import time
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
    #: Method and client port of each request, in the order of ``requests``.
    calls: list[tuple[str, int]] = field(default_factory=list)
    #: Sent as ``Location`` with every answer (a redirect, with a 3xx status).
    location: str | None = None
    #: Seconds to wait before answering.
    delay: float = 0.0
    #: Keep connections open between requests (HTTP/1.1), as most services do.
    keep_alive: bool = False
    #: Sent as ``Retry-After`` with every answer that is no 2xx.
    retry_after: str | None = None
    #: ``time.monotonic()`` of each request, in the order of ``requests``.
    times: list[float] = field(default_factory=list)
    #: Scripted statuses of a path (the last one repeats), instead of ``statuses``.
    by_path: dict[str, list[int]] = field(default_factory=dict)

    def next_status(self) -> int:
        """The scripted status for this request; the last one repeats."""
        path = self.requests[-1][0] if self.requests else ""
        if path in self.by_path:
            statuses, index = self.by_path[path], len(self.paths(path)) - 1
        else:
            statuses, index = self.statuses, len(self.requests) - 1
        return statuses[min(index, len(statuses) - 1)]

    def paths(self, path: str) -> list[dict[str, str]]:
        """The headers of each request to ``path``."""
        return [headers for at, headers, _ in self.requests if at == path]


@contextmanager
def serve(endpoint: Endpoint, host: str = "127.0.0.1") -> Iterator[Endpoint]:
    """Run the endpoint on a free port of loopback address ``host`` for the block."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if endpoint.keep_alive else "HTTP/1.0"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            endpoint.requests.append((self.path, dict(self.headers.items()), body))
            endpoint.calls.append((self.command, self.client_address[1]))
            endpoint.times.append(time.monotonic())
            status = endpoint.next_status()
            time.sleep(endpoint.delay)
            self.send_response(status)
            if endpoint.location is not None:
                self.send_header("Location", endpoint.location)
            if endpoint.retry_after is not None and not 200 <= status < 300:
                self.send_header("Retry-After", endpoint.retry_after)
            # A 204 has no body by definition; every other answer says the same few bytes.
            answer = b"" if status == 204 else b"not here!"
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        do_GET = do_PUT = do_PATCH = do_DELETE = do_POST

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    endpoint.url = f"http://{host}:{server.server_address[1]}"
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
