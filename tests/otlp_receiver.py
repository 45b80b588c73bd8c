"""A local OTLP/HTTP trace receiver for tests: accepts ``POST /v1/traces`` (protobuf), keeps
every span it is sent, on a free port of 127.0.0.1 (nothing leaves loopback)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

PROTOBUF = "application/x-protobuf"
#: OTLP's status codes (opentelemetry/proto/trace/v1/trace.proto).
STATUS_NAMES = {0: "UNSET", 1: "OK", 2: "ERROR"}


@dataclass(frozen=True)
class Span:
    """One received span, ids in hex as in a ``traceparent``."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    status: str
    status_message: str


@dataclass
class Receiver:
    """What the receiver was sent."""

    url: str = ""
    spans: list[Span] = field(default_factory=list)
    #: Requests received, whether or not they held spans.
    posts: int = 0

    def of_trace(self, trace_id: str) -> list[Span]:
        """The spans of one trace."""
        return [span for span in self.spans if span.trace_id == trace_id]

    def named(self, prefix: str) -> list[Span]:
        """The spans whose name starts with ``prefix``."""
        return [span for span in self.spans if span.name.startswith(prefix)]


def value(item: AnyValue) -> Any:
    """An OTLP attribute value as a Python value."""
    kind = item.WhichOneof("value")
    return None if kind is None else getattr(item, kind)


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    """The spans of one export request, with their resource's ``service.name``."""
    found = []
    for resource_spans in request.resource_spans:
        resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    Span(
                        service=str(resource.get("service.name")),
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        attributes={a.key: value(a.value) for a in span.attributes},
                        status=STATUS_NAMES[span.status.code],
                        status_message=span.status.message,
                    )
                )
    return found


@asynccontextmanager
async def receiving(receiver: Receiver | None = None, port: int = 0) -> AsyncIterator[Receiver]:
    """Run a receiver on 127.0.0.1 (``port``, else a free one) for the block; its ``url`` is
    the OTLP endpoint."""
    receiver = Receiver() if receiver is None else receiver

    async def traces(request: web.Request) -> web.Response:
        receiver.posts += 1
        parsed = ExportTraceServiceRequest()
        try:
            parsed.ParseFromString(await request.read())
        except Exception:  # protobuf's DecodeError, whose module has no type hints
            return web.Response(status=400, text="not an OTLP protobuf export")
        receiver.spans.extend(spans_of(parsed))
        answer = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=answer, content_type=PROTOBUF)

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    receiver.url = f"http://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        await runner.cleanup()


async def serve_until_stopped(port: int) -> None:
    """Receive on 127.0.0.1:``port`` until SIGTERM or SIGINT; print the spans received."""
    receiver = Receiver()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with receiving(receiver, port):
        await stop.wait()
    print(f"{len(receiver.spans)} spans in {receiver.posts} requests", flush=True)


if __name__ == "__main__":
    # The benchmark's receiver (BENCHMARKS.md, "drain"): python -m tests.otlp_receiver 4318
    asyncio.run(serve_until_stopped(int(sys.argv[1])))
