"""Handlers by task name. A message names a handler; it never names code to run."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from warren_cron.durations import parse_ms
from warren_cron.envelope import check_task
from warren_cron.errors import HandlerImportError
from warren_cron.worker.context import TaskContext
from warren_cron.worker.handles import AsyncTaskHandle, SyncTaskHandle, TaskHandle
from warren_cron.worker.payloads import Shape, checking, payload_annotation, shape_of

Handler = Callable[[Any, TaskContext], object]
P = TypeVar("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Registered:
    """One handler and how to call it."""

    name: str
    func: Handler
    is_async: bool
    #: The handler bounds itself by ``ctx.timeout_seconds`` (``times_itself = True``), so the
    #: attempt sets no second timer around it.
    times_itself: bool = False
    #: The function as written (``func`` checks its payload first when it is typed).
    origin: Handler | None = None
    #: The payload's type, when the handler's payload annotation is a model.
    payload: Shape[Any] | None = None
    #: The result's type, when the handler's return annotation is a model.
    result: Shape[Any] | None = None
    #: Seconds between the handler's ``ctx.heartbeat`` calls, when it declared them: its
    #: attempts run long (``worker/longrun.py``) and fail as hung when the calls stop.
    heartbeat_seconds: float | None = None


class Decorator:
    """What ``@task("name")`` applies: registers the function and returns its handle."""

    def __init__(
        self, registry: Registry, name: str | None, heartbeat: str | float | None = None
    ) -> None:
        self._registry = registry
        self._name = name
        self._heartbeat = heartbeat

    # A coroutine function matches both; the first, the async one, is the one mypy picks.
    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, func: Callable[[P, TaskContext], Coroutine[Any, Any, R]]
    ) -> AsyncTaskHandle[P, R]: ...

    @overload
    def __call__(self, func: Callable[[P, TaskContext], R]) -> SyncTaskHandle[P, R]: ...

    def __call__(self, func: Callable[[Any, TaskContext], Any]) -> TaskHandle[Any, Any]:
        """Register ``func`` and return its handle."""
        name = self._name or func.__name__
        registered = self._registry.register(name, func, heartbeat=self._heartbeat)
        kind = AsyncTaskHandle if registered.is_async else SyncTaskHandle
        return kind(registered.name, func, registered.payload, registered.result)


class Registry:
    """Maps task names to handlers."""

    def __init__(self) -> None:
        self._handlers: dict[str, Registered] = {}

    def register(
        self, name: str, func: Handler, *, heartbeat: str | float | None = None
    ) -> Registered:
        """Register ``func`` under ``name``; a second handler for one name is a mistake, and
        so is a name no enqueue could give (``check_task``). A handler whose payload is
        annotated with a model runs behind its check (``worker/payloads.py``); any other
        runs as it is. ``heartbeat`` (``"1m"`` or seconds) is how often it heartbeats."""
        check_task(name)
        beat = heartbeat_seconds(name, heartbeat)
        origin = func.func if isinstance(func, TaskHandle) else func
        old = self._handlers.get(name)
        if old is not None and old.origin is not origin:
            raise ValueError(f"task {name!r} already has a handler: {old.origin!r}")
        is_async = inspect.iscoroutinefunction(origin) or inspect.iscoroutinefunction(
            getattr(origin, "__call__", None)  # noqa: B004 - a handler may be an object with async __call__
        )
        times_itself = is_async and getattr(origin, "times_itself", False) is True
        annotations = payload_annotation(name, origin)
        payload, result = shape_of(name, annotations[0]), shape_of(name, annotations[1])
        runs = origin if payload is None and result is None else checking(origin, payload, result)
        registered = Registered(name, runs, is_async, times_itself, origin, payload, result, beat)
        self._handlers[name] = registered
        return registered

    def task(self, name: str | None = None, *, heartbeat: str | float | None = None) -> Decorator:
        """Decorator: ``@task("send_report")`` registers the function under that name and
        returns its handle (``worker/handles.py``), still callable as the function;
        ``heartbeat="1m"`` says it calls ``ctx.heartbeat`` at least that often."""
        return Decorator(self, name, heartbeat)

    def get(self, name: str) -> Registered | None:
        """The handler registered under ``name``, if any."""
        return self._handlers.get(name)

    def names(self) -> list[str]:
        """Every registered task name, sorted."""
        return sorted(self._handlers)

    def merged(self, other: Registry) -> Registry:
        """A new registry with the handlers of both."""
        merged = Registry()
        merged._handlers = {**self._handlers, **other._handlers}
        return merged


def heartbeat_seconds(name: str, heartbeat: str | float | None) -> float | None:
    """Seconds of a handler's heartbeat interval, or ValueError saying how to write one."""
    if heartbeat is None:
        return None
    ms = parse_ms(heartbeat) if isinstance(heartbeat, str) else heartbeat * 1000
    if ms is None or ms <= 0:
        raise ValueError(
            f"task {name!r}: heartbeat={heartbeat!r} is no interval; write seconds (30) or a "
            'duration ("30s", "5m")'
        )
    return ms / 1000


#: Handlers registered with ``@worker.task`` by modules listed in ``CRON_HANDLER_MODULES``.
default_registry = Registry()
task = default_registry.task


def with_working_directory() -> None:
    """Put the working directory first on the import path, once."""
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)


def import_handler_modules(modules: Iterable[str]) -> None:
    """Import each module so its ``@task`` decorators run; fail with the module's name.

    The working directory is searched first, as ``python -m`` does: ``warren worker`` started
    in an application's folder finds its handler modules (celery, dramatiq and arq do the same).
    """
    with_working_directory()
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as error:
            raise HandlerImportError(
                f"CRON_HANDLER_MODULES: cannot import {module!r} "
                f"({type(error).__name__}: {error}); check the module path and PYTHONPATH"
            ) from error
