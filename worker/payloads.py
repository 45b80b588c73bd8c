"""Typed payloads: a handler's payload annotation checks the payload at enqueue and at the worker.

A handler whose payload parameter is annotated with a pydantic model, a ``TypedDict`` or a
dataclass gets a pydantic ``TypeAdapter`` for it: an enqueue through its handle validates the
payload and sends it as JSON; the worker validates what arrives before the handler runs, and
a payload that does not fit fails at once as ``invalid-payload`` with each field's problem,
with no retry spent (no retry could fix it). Any other annotation (``dict``, ``Any``, none)
leaves the handler as it is, costing nothing per task. A return annotation of the same kinds
types the run's result: the worker sends it as JSON, and ``result()`` on the handle reads it
back into that type.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar, is_typeddict

from pydantic import BaseModel, PydanticUserError, TypeAdapter, ValidationError

from warren_cron.errors import EnqueueError, HandlerImportError, PermanentError, validation_problems

T = TypeVar("T")


class InvalidPayload(PermanentError):
    """A payload that does not fit the handler's payload type; no retry could fix it."""

    reason: ClassVar[str] = "invalid-payload"


def is_model(annotation: object) -> bool:
    """A pydantic model, a TypedDict or a dataclass: a type a payload is checked against."""
    if not isinstance(annotation, type):
        return False
    return (
        issubclass(annotation, BaseModel)
        or is_typeddict(annotation)
        or dataclasses.is_dataclass(annotation)
    )


def annotations_of(func: Callable[..., object]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The handler's raw annotations and the globals they are resolved in."""
    target: Any = func
    if not (inspect.isfunction(func) or inspect.ismethod(func)):
        target = type(func).__call__
    target = inspect.unwrap(target)
    return dict(getattr(target, "__annotations__", {})), getattr(target, "__globals__", {})


def resolved(name: str, func: Callable[..., object], key: str) -> object:
    """One annotation of the handler, resolved; one that cannot be (a model that failed to
    import, a name imported only under ``TYPE_CHECKING``) is a clear error at registration,
    rather than a payload that goes unchecked."""
    raw, globalns = annotations_of(func)
    if key not in raw:
        return None
    holder = types.SimpleNamespace(__annotations__={key: raw[key]}, __globals__=globalns)
    try:
        return typing.get_type_hints(holder)[key]
    except Exception as error:
        raise HandlerImportError(
            f"task {name!r}: cannot resolve the annotation {raw[key]!r} of its handler "
            f"({type(error).__name__}: {error}); import the payload and result types at "
            "module level, where the worker can import them"
        ) from error


def payload_annotation(name: str, func: Callable[..., object]) -> tuple[object, object]:
    """The annotations of the handler's first parameter and of its return (None if none)."""
    try:
        parameters = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None, None
    first = resolved(name, func, parameters[0]) if parameters else None
    return first, resolved(name, func, "return")


class Shape(Generic[T]):
    """One type's check: validate a payload (or a result) into it, and dump it back to JSON."""

    __slots__ = ("adapter", "annotation", "instances")

    def __init__(self, annotation: type[T]) -> None:
        self.annotation = annotation
        self.adapter: TypeAdapter[T] = TypeAdapter(annotation)
        #: A model or a dataclass passes as it is; a TypedDict has no instances of its own.
        self.instances = not is_typeddict(annotation)

    def problems(self, error: ValidationError) -> str:
        """Each field's problem on one line, never the values (they may be secrets)."""
        return "; ".join(validation_problems(error, whole="payload"))

    def load(self, value: object) -> T:
        """``value`` as the type, or ``ValidationError``."""
        if self.instances and isinstance(value, self.annotation):
            return value
        return self.adapter.validate_python(value)

    def dump(self, value: object) -> Any:
        """The JSON data of a value of the type (an instance, or data that validates to one)."""
        return self.adapter.dump_python(self.load(value), mode="json")

    def schema(self) -> dict[str, Any]:
        """The type's JSON schema."""
        return self.adapter.json_schema()


def shape_of(name: str, annotation: object) -> Shape[Any] | None:
    """A check for a model annotation; None for any other (no check, no cost)."""
    if not is_model(annotation) or not isinstance(annotation, type):
        return None
    try:
        return Shape(annotation)
    except PydanticUserError as error:
        raise HandlerImportError(
            f"task {name!r}: its type {annotation.__name__} cannot be checked: {error.message}"
        ) from None


def checked_payload(task: str, shape: Shape[Any], payload: object) -> Any:
    """The payload as JSON data for an enqueue of ``task``; ``EnqueueError`` naming each field
    that does not fit, before anything is sent."""
    try:
        return shape.dump(payload)
    except ValidationError as error:
        raise EnqueueError(
            f"task {task!r}: the payload is no {shape.annotation.__name__}: {shape.problems(error)}"
        ) from None


def loaded_payload(shape: Shape[Any], payload: object) -> Any:
    """The payload as the handler's type, or ``InvalidPayload`` naming each field."""
    try:
        return shape.load(payload)
    except ValidationError as error:
        raise InvalidPayload(
            f"the payload is no {shape.annotation.__name__}: {shape.problems(error)}"
        ) from None


def checking(
    func: Callable[..., Any], payload: Shape[Any] | None, result: Shape[Any] | None
) -> Callable[..., Any]:
    """``func`` behind the payload's check and the result's dump, async if ``func`` is."""

    def load(value: Any) -> Any:
        return value if payload is None else loaded_payload(payload, value)

    def dump(value: Any) -> Any:
        return value if result is None or value is None else result.dump(value)

    if inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 - an object with an async __call__
    ):

        async def checked_async(value: Any, ctx: Any) -> Any:
            returned = await func(load(value), ctx)
            return dump(returned)

        wrapper: Callable[..., Any] = checked_async
    else:

        def checked_sync(value: Any, ctx: Any) -> Any:
            returned = func(load(value), ctx)
            return dump(returned)

        wrapper = checked_sync
    if getattr(func, "times_itself", False) is True:
        wrapper.times_itself = True  # type: ignore[attr-defined]
    return functools.wraps(func)(wrapper) if inspect.isfunction(func) else wrapper
