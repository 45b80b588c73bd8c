"""Log lines: one JSON object each, whether structlog or the standard library wrote them."""

from __future__ import annotations

import ast
import inspect
import logging
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

import aio_pika.robust_connection
import aio_pika.tools
import aiormq.connection
import orjson
import pytest
import structlog

from warren_cron.runtime.chatter import CHATTER
from warren_cron.runtime.logs import DictLines, configure_logging

#: Each library logger the chatter table names, with the module that logs through it.
LIBRARY_MODULES = {
    "aio_pika.robust_connection": aio_pika.robust_connection,
    "aio_pika.tools": aio_pika.tools,
    "aiormq.connection": aiormq.connection,
}
RETRY_TEMPLATE = 'Connection attempt to "%s" failed: %s. Reconnecting after %r seconds.'


@pytest.fixture(autouse=True)
def fresh_logging() -> Iterator[None]:
    """Whatever a test configures, logging and structlog are put back as they were."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    config, hook = structlog.get_config(), sys.excepthook
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.configure(**config)
    sys.excepthook = hook
    logging.captureWarnings(False)


def configure(level: str, fmt: Literal["json", "console"] = "json") -> None:
    """``configure_logging`` as a process starts it: with no handler on the root logger."""
    logging.getLogger().handlers[:] = []
    configure_logging(level, fmt)


def fail(message: str) -> None:
    """Raise a ``ValueError``, as library code would."""
    raise ValueError(message)


def json_lines(capfd: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """Every line written to stdout and stderr, each parsed as one JSON object."""
    out, err = capfd.readouterr()
    lines = [orjson.loads(line) for line in (out + err).splitlines()]
    assert all(isinstance(line, dict) for line in lines), lines
    return lines


def test_a_library_warning_and_an_exception_come_out_as_json_objects(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A stdlib warning and a logged exception: one JSON line each, traceback included."""
    configure("INFO")
    library = logging.getLogger("some.library")
    library.warning("disk %s is %d%% full", "/data", 93)
    try:
        fail("boom")
    except ValueError:
        library.exception("could not write")
    warning, error = json_lines(capfd)
    assert (warning["level"], warning["logger"], warning["event"]) == (
        "warning",
        "some.library",
        "disk /data is 93% full",
    )
    assert (error["level"], error["event"]) == ("error", "could not write")
    assert error["exception"].startswith("Traceback (most recent call last):")
    assert error["exception"].rstrip().endswith("ValueError: boom")


def test_structlog_and_library_lines_carry_the_same_fields(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Timestamp, level, event and logger name on both kinds of line, in one stream."""
    configure("INFO")
    structlog.get_logger("worker").info("attempt", outcome="ack")
    logging.getLogger("aiormq.channel").warning("a library line")
    ours, theirs = json_lines(capfd)
    assert ours.keys() - {"outcome"} == theirs.keys() == {"timestamp", "level", "event", "logger"}
    assert (ours["logger"], theirs["logger"]) == ("worker", "aiormq.channel")


def test_library_info_lines_stay_out_even_at_debug(capfd: pytest.CaptureFixture[str]) -> None:
    """httpx logs each request URL at INFO (a webhook's token): libraries log warnings up."""
    configure("DEBUG")
    logging.getLogger("httpx").info("HTTP Request: POST https://hooks.example/T0KEN")
    assert json_lines(capfd) == []


def test_a_password_in_a_library_line_is_hidden(capfd: pytest.CaptureFixture[str]) -> None:
    """A URL with its password in a library's message or exception is logged without it."""
    configure("INFO")
    try:
        fail("cannot open amqps://app:s3cret@rabbit:5671/prod")
    except ValueError:
        logging.getLogger("lib").exception("connect to amqp://app:s3cret@rabbit/ failed")
    [line] = json_lines(capfd)
    assert "s3cret" not in orjson.dumps(line).decode()
    assert "amqp://app:***@rabbit/" in line["event"]


@pytest.mark.parametrize(("level", "shown"), [("INFO", []), ("DEBUG", ["debug"])])
def test_a_failed_reconnect_try_is_a_debug_line(
    capfd: pytest.CaptureFixture[str], level: str, shown: list[str]
) -> None:
    """aio-pika's warning for each failed reconnect try shows at DEBUG only, as a DEBUG line."""
    configure(level)
    retries = logging.getLogger("aio_pika.robust_connection")
    retries.warning(RETRY_TEMPLATE, "amqp://guest:******@rabbit/", "refused", 1)
    assert [line["level"] for line in json_lines(capfd)] == shown


def test_other_library_warnings_keep_their_level(capfd: pytest.CaptureFixture[str]) -> None:
    """Only the reconnect chatter is demoted: aio-pika's other warnings stay warnings."""
    configure("INFO")
    logging.getLogger("aio_pika.robust_connection").warning("something else went wrong")
    [line] = json_lines(capfd)
    assert line["level"] == "warning"


@pytest.mark.parametrize(
    ("logger", "template"),
    [(logger, template) for logger, templates in CHATTER.items() for template in templates],
)
def test_every_demoted_template_is_one_the_installed_library_logs(
    logger: str, template: str
) -> None:
    """An aio-pika or aiormq upgrade that rewords a demoted message fails here."""
    tree = ast.parse(inspect.getsource(LIBRARY_MODULES[logger]))
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)}
    assert template in strings
    assert LIBRARY_MODULES[logger].log.name == logger


def test_an_uncaught_exception_is_one_json_line(capfd: pytest.CaptureFixture[str]) -> None:
    """A crash's traceback is written as a JSON line, not as plain text on stderr."""
    configure("INFO")
    try:
        fail("crash")
    except ValueError:
        sys.excepthook(*sys.exc_info())
    [line] = json_lines(capfd)
    assert (line["level"], line["event"]) == ("critical", "uncaught exception")
    assert "ValueError: crash" in line["exception"]


def test_console_format_renders_library_lines_like_its_own(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """CRON_LOG_FORMAT=console: a library warning goes through the console renderer."""
    configure("INFO", "console")
    logging.getLogger("some.library").warning("disk full")
    out, err = capfd.readouterr()
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # colours
    assert err == ""
    assert "[warning" in out and "disk full" in out and "some.library" in out
    assert "WARNING:some.library" not in out


def test_a_line_from_a_dict_is_the_line_of_keywords(capfd: pytest.CaptureFixture[str]) -> None:
    """``DictLines`` writes what ``logger.info(event, **fields)`` writes (the worker's attempt
    line), its own timestamp kept, and leaves the caller's dict as it was."""
    configure("INFO")
    logger = structlog.get_logger("worker").bind()
    fields: dict[str, Any] = {"run_id": "r1", "attempt": 2, "error": None}
    stamped = {**fields, "timestamp": "2026-11-29T15:00:00.000001Z"}
    DictLines(logger).write("warning", "attempt", stamped)
    logger.warning("attempt", **stamped)
    ours, theirs = json_lines(capfd)
    assert ours == theirs
    assert ours["timestamp"] == "2026-11-29T15:00:00.000001Z"
    assert (ours["level"], ours["logger"], ours["run_id"]) == ("warning", "worker", "r1")
    assert stamped == {**fields, "timestamp": "2026-11-29T15:00:00.000001Z"}


def test_a_line_from_a_dict_keeps_the_level_filter(capfd: pytest.CaptureFixture[str]) -> None:
    """At ``CRON_LOG_LEVEL=WARNING`` an info line from a dict is dropped, an error kept."""
    configure("WARNING")
    lines = DictLines(structlog.get_logger("worker").bind())
    lines.write("info", "attempt", {"outcome": "succeeded"})
    lines.write("error", "attempt", {"outcome": "failed"})
    [line] = json_lines(capfd)
    assert (line["level"], line["outcome"]) == ("error", "failed")


def test_a_line_without_its_own_time_is_stamped_now(capfd: pytest.CaptureFixture[str]) -> None:
    """A line that brings no timestamp gets the current time, ISO 8601 in UTC."""
    configure("INFO")
    before = datetime.now(UTC)
    DictLines(structlog.get_logger("worker").bind()).write("info", "attempt", {})
    [line] = json_lines(capfd)
    assert before <= datetime.fromisoformat(line["timestamp"]) <= datetime.now(UTC)
