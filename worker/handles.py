"""Task handles: what ``@task`` returns, to enqueue that task by name-checked, typed calls.

``await send_report.enqueue(Report(customer=42), delay=90)`` sends through the client given
as ``client=``, else through the handles' default: the clients made from the ``CRON_*``
settings on first use (one ``Client`` per event loop, one ``SyncClient`` per process), or
the ones ``use_clients`` put in place (the testing kit's eager client does). The handle is
still the handler: ``await send_report(payload, ctx)`` calls the function.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, Unpack

from warren_cron.worker.context import TaskContext
from warren_cron.worker.payloads import Shape, checked_payload

if TYPE_CHECKING:
    # Only named in annotations: a worker that imports its handlers loads no client.
    from warren_cron.client import Client, SyncClient
    from warren_cron.client.options import Enqueued, EnqueueOptions

P = TypeVar("P")
R = TypeVar("R")


class AsyncRun(Protocol):
    """A run handle of an async client (``Client.run``)."""

    async def result(self, timeout: float | None = None) -> Any:
        """The run's result once it ended."""


class SyncRun(Protocol):
    """A run handle of a sync client (``SyncClient.run``)."""

    def result(self, timeout: float | None = None) -> Any:
        """The run's result once it ended."""


class AsyncEnqueuer(Protocol):
    """What a handle enqueues through from async code: ``Client`` or the kit's eager client."""

    async def enqueue(
        self, task: str, payload: Any = None, **options: Unpack[EnqueueOptions]
    ) -> Enqueued:
        """Send one task."""

    def run(self, run: str | Enqueued) -> AsyncRun:
        """A handle on one run."""


class SyncEnqueuer(Protocol):
    """What a handle enqueues through from sync code: ``SyncClient`` or the kit's eager one."""

    def enqueue(
        self, task: str, payload: Any = None, **options: Unpack[EnqueueOptions]
    ) -> Enqueued:
        """Send one task."""

    def run(self, run: str | Enqueued) -> SyncRun:
        """A handle on one run."""


class Defaults:
    """The handles' default clients: set by ``use_clients``, else made from the settings."""

    def __init__(self) -> None:
        self.forced: tuple[AsyncEnqueuer, SyncEnqueuer] | None = None
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client] = (
            weakref.WeakKeyDictionary()
        )
        self._sync: SyncClient | None = None
        self._lock = threading.Lock()

    def for_async(self) -> AsyncEnqueuer:
        """The forced client, else this event loop's ``Client`` from the settings."""
        if self.forced is not None:
            return self.forced[0]
        from warren_cron.client import Client

        loop = asyncio.get_running_loop()
        client = self._per_loop.get(loop)
        if client is None:
            client = self._per_loop[loop] = Client(name="warren-task-handles")
        return client

    def for_sync(self) -> SyncEnqueuer:
        """The forced client, else the process's ``SyncClient`` from the settings."""
        if self.forced is not None:
            return self.forced[1]
        with self._lock:
            if self._sync is None:
                from warren_cron.client import SyncClient

                self._sync = SyncClient(name="warren-task-handles")
                # Its background loop is a daemon thread: close the connection politely.
                atexit.register(self._sync.close)
            return self._sync


DEFAULTS = Defaults()


@contextmanager
def use_clients(async_client: AsyncEnqueuer, sync_client: SyncEnqueuer) -> Iterator[None]:
    """Within the block, handles enqueue through these clients unless given ``client=``."""
    before, DEFAULTS.forced = DEFAULTS.forced, (async_client, sync_client)
    try:
        yield
    finally:
        DEFAULTS.forced = before


class TaskHandle(Generic[P, R]):
    """A registered task: enqueue it with its payload's type checked, read its typed result."""

    def __init__(
        self,
        name: str,
        func: Callable[..., Any],
        payload: Shape[Any] | None = None,
        result: Shape[Any] | None = None,
    ) -> None:
        self.name = name
        self.func = func
        self.payload_shape = payload
        self.result_shape = result
        self.__doc__ = func.__doc__
        self.__name__ = getattr(func, "__name__", name)
        self.__wrapped__ = func

    def __repr__(self) -> str:
        return f"<task {self.name!r}: {self.func!r}>"

    def payload_of(self, payload: P) -> Any:
        """The payload as sent: checked and turned to JSON data when the handler is typed."""
        if self.payload_shape is None:
            return payload
        return checked_payload(self.name, self.payload_shape, payload)

    def result_of(self, value: Any) -> R:
        """A run's result as the handler's return type."""
        return value if self.result_shape is None else self.result_shape.load(value)  # type: ignore[no-any-return]

    async def enqueue(
        self,
        payload: P,
        *,
        client: AsyncEnqueuer | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> Enqueued:
        """Send this task (``Client.enqueue``), its payload checked first: ``EnqueueError``
        naming each field that does not fit, and nothing sent."""
        body = self.payload_of(payload)
        return await (client or DEFAULTS.for_async()).enqueue(self.name, body, **options)

    def enqueue_sync(
        self,
        payload: P,
        *,
        client: SyncEnqueuer | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> Enqueued:
        """``enqueue`` for code without an event loop (``SyncClient.enqueue``)."""
        body = self.payload_of(payload)
        return (client or DEFAULTS.for_sync()).enqueue(self.name, body, **options)

    async def result(
        self,
        run: str | Enqueued,
        *,
        timeout: float | None = None,
        client: AsyncEnqueuer | None = None,
    ) -> R:
        """Wait for the run to end and return its result as the handler's return type;
        ``RunFailed`` when it failed, ``RunTimeout`` after ``timeout`` seconds."""
        handle = (client or DEFAULTS.for_async()).run(run)
        return self.result_of(await handle.result(timeout))

    def result_sync(
        self,
        run: str | Enqueued,
        *,
        timeout: float | None = None,
        client: SyncEnqueuer | None = None,
    ) -> R:
        """``result`` for code without an event loop."""
        return self.result_of((client or DEFAULTS.for_sync()).run(run).result(timeout))

    def schema(self) -> dict[str, Any] | None:
        """The payload's JSON schema, when the handler's payload is typed."""
        return None if self.payload_shape is None else self.payload_shape.schema()


class AsyncTaskHandle(TaskHandle[P, R]):
    """The handle of an ``async def`` handler; calling it calls the handler."""

    def __call__(self, payload: P, ctx: TaskContext) -> Coroutine[Any, Any, R]:
        """Call the handler, as a test or another handler may."""
        return self.func(payload, ctx)  # type: ignore[no-any-return]


class SyncTaskHandle(TaskHandle[P, R]):
    """The handle of a plain ``def`` handler; calling it calls the handler."""

    def __call__(self, payload: P, ctx: TaskContext) -> R:
        """Call the handler, as a test or another handler may."""
        return self.func(payload, ctx)  # type: ignore[no-any-return]
