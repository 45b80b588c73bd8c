"""A keep-alive HTTP/1.1 endpoint for ``bench.py http``, run as its own process.

It answers every request ``200 ok`` and does nothing else, so that the endpoint costs as
little CPU as possible on a machine the contenders share with it: a bare asyncio protocol,
no framework. It prints its port once it listens and counts nothing: the contenders do.

    python -m benchlib.endpoint      # prints the port, serves until SIGTERM
"""

from __future__ import annotations

import asyncio
import signal

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


def body_length(head: bytes) -> int:
    """The ``Content-Length`` of a request head, 0 when it has none."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


class Answer(asyncio.Protocol):
    """Reads pipelined or sequential requests off one connection and answers each."""

    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport to answer on."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        """Answer every complete request in the buffer."""
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            size = end + 4 + body_length(self.buffer[:end])
            if len(self.buffer) < size:
                return
            self.buffer = self.buffer[size:]
            assert self.transport is not None
            self.transport.write(RESPONSE)


async def serve() -> None:
    """Listen on a free loopback port, print it, serve until SIGTERM."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Answer, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(serve())
