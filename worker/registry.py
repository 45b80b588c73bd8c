"""Handlers by task name. A message names a handler; it never names code to run."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from warren_cron.envelope import check_task
from warren_cron.errors import HandlerImportError
from warren_cron.worker.context import TaskContext

Handler = Callable[[Any, TaskContext], object]
F = TypeVar("F", bound=Handler)


@dataclass(frozen=True, slots=True)
class Registered:
    """One handler and how to call it."""

    name: str
    func: Handler
    is_async: bool
    #: The handler bounds itself by ``ctx.timeout_seconds`` (``times_itself = True``), so the
    #: attempt sets no second timer around it.
    times_itself: bool = False


class Registry:
    """Maps task names to handlers."""

    def __init__(self) -> None:
        self._handlers: dict[str, Registered] = {}

    def register(self, name: str, func: Handler) -> None:
        """Register ``func`` under ``name``; a second handler for one name is a mistake, and
        so is a name no enqueue could give (``check_task``)."""
        check_task(name)
        old = self._handlers.get(name)
        if old is not None and old.func is not func:
            raise ValueError(f"task {name!r} already has a handler: {old.func!r}")
        is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
            getattr(func, "__call__", None)  # noqa: B004 - a handler may be an object with async __call__
        )
        times_itself = is_async and getattr(func, "times_itself", False) is True
        self._handlers[name] = Registered(name, func, is_async, times_itself)

    def task(self, name: str | None = None) -> Callable[[F], F]:
        """Decorator: ``@task("send_report")`` registers the function under that name."""

        def decorate(func: F) -> F:
            self.register(name or func.__name__, func)
            return func

        return decorate

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
