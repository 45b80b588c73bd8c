"""JSON values in models, checked once: not again when they were just parsed from JSON.

pydantic's ``JsonValue`` walks a value recursively through a union of every JSON type: for a
small nested payload that is most of the cost of validating an envelope (a worker validates
one per task, and the http task's payload a second time). A value that ``orjson.loads`` just
returned is JSON by construction, so validation given the ``DECODED`` context takes it as it
is; everywhere else (envelopes built in code, schedules read from TOML) it is checked in full.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import JsonValue, ValidationInfo, ValidatorFunctionWrapHandler, WrapValidator

#: Validation context for data that ``orjson.loads`` returned.
DECODED: dict[str, bool] = {"decoded_json": True}
#: The deepest a payload may nest: a message, a stored schedule and a history record wrap it
#: a few levels more, and orjson writes at most 254 (and nothing real nests past a dozen).
MAX_DEPTH = 64


def check_depth(value: Any) -> Any:
    """``value`` when it nests at most ``MAX_DEPTH`` deep; else ValueError saying so. Walked
    without recursion, so that a hostile depth cannot exhaust the stack here."""
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH):
        inner: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                inner.extend(item.values())
            elif isinstance(item, list | tuple):
                inner.extend(item)
        if not inner:
            return value
        level = inner
    raise ValueError(f"nested more than {MAX_DEPTH} levels deep: flatten it")


def _check_unless_decoded(
    value: Any, check: ValidatorFunctionWrapHandler, info: ValidationInfo
) -> Any:
    """The value as it is when it was just decoded from JSON, else ``JsonValue``'s check."""
    return value if info.context is DECODED else check(value)


#: ``JsonValue``, not checked again under the ``DECODED`` context.
Json = Annotated[JsonValue, WrapValidator(_check_unless_decoded)]
