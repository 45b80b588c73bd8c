"""Typed payloads at registration: what is checked, what costs nothing, what stops a worker."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.kit_handlers import send_report, untyped
from warren_cron.errors import HandlerImportError
from warren_cron.worker.registry import Registry, default_registry, import_handler_modules

UNRESOLVABLE = '''
from __future__ import annotations
from typing import TYPE_CHECKING
from warren_cron import TaskContext
from warren_cron.worker.registry import Registry

if TYPE_CHECKING:
    from billing.models import Invoice

registry = Registry()


@registry.task("bill")
async def bill(payload: Invoice, ctx: TaskContext) -> None:
    """A payload model the worker cannot import."""
'''
BROKEN_MODEL = '''
from warren_cron import TaskContext, task
from {models} import Invoice


@task("kit-invoice")
async def invoice(payload: Invoice, ctx: TaskContext) -> None:
    """A handler whose model module fails as it is imported."""
'''


def test_an_untyped_handler_is_registered_as_it_is() -> None:
    """No model annotation, no wrapper: the function itself runs, at no cost per task."""
    found = default_registry.get("kit-untyped")
    assert found is not None and found.func is untyped.func and found.payload is None


def test_a_typed_handler_runs_behind_its_check() -> None:
    """A model annotation: the worker calls a wrapper that checks the payload first."""
    found = default_registry.get("kit-report")
    assert found is not None and found.func is not send_report.func and found.is_async
    assert found.origin is send_report.func
    assert found.payload is not None and send_report.schema() == found.payload.schema()


def test_a_handle_registered_again_is_the_same_handler() -> None:
    """``register(name, handle)`` registers the handle's function; twice is no conflict."""
    mine = Registry()
    mine.register("kit-report", send_report)
    mine.register("kit-report", send_report)
    found = mine.get("kit-report")
    assert found is not None and found.origin is send_report.func


def test_a_payload_model_the_worker_cannot_resolve_stops_the_registration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model imported only for type checkers would leave payloads unchecked: registering
    it fails, naming the task, the annotation and what to do."""
    (tmp_path / "unresolvable_jobs.py").write_text(UNRESOLVABLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(HandlerImportError) as raised:
        import_handler_modules(["unresolvable_jobs"])
    text = str(raised.value)
    assert "cannot import 'unresolvable_jobs'" in text
    assert "task 'bill': cannot resolve the annotation 'Invoice'" in text
    assert "import the payload and result types at module level" in text
    sys.modules.pop("unresolvable_jobs", None)


def test_a_model_module_that_fails_to_import_stops_the_worker_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handler module's model raises as it is imported: the worker's start fails with
    the handler module and the model's error."""
    (tmp_path / "kit_broken_models.py").write_text("raise RuntimeError('no database url')\n")
    (tmp_path / "kit_broken_jobs.py").write_text(BROKEN_MODEL.format(models="kit_broken_models"))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(HandlerImportError, match=r"'kit_broken_jobs'.*no database url"):
        import_handler_modules(["kit_broken_jobs"])
    assert default_registry.get("kit-invoice") is None
