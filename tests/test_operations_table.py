"""The Operations table of docs/architecture.md tells the code as it is: each row's function
lives in the module it names, and every module of the operations layer has its rows."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import warren_cron.ops

ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
#: A row of the table: | `name` | `warren_cron.ops.module` | surfaces |
ROW = re.compile(r"^\| `(\w+)` \| `(warren_cron\.ops\.\w+)` \|", re.MULTILINE)


def table_rows() -> list[tuple[str, str]]:
    """The (operation, module) rows of the section ``## Operations``."""
    text = ARCHITECTURE.read_text()
    section = text.split("\n## Operations\n", 1)[1].split("\n## ", 1)[0]
    return ROW.findall(section)


def test_the_operations_table_has_rows() -> None:
    """The table is found and read: the checks below are not about an empty list."""
    assert len(table_rows()) >= 20


@pytest.mark.parametrize("name, module", table_rows(), ids=lambda value: str(value))
def test_each_operation_named_is_defined_in_the_module_named(name: str, module: str) -> None:
    """A reader who opens the module the table names finds the operation there."""
    found = getattr(importlib.import_module(module), name, None)
    assert found is not None, f"{module} has no {name}"
    assert getattr(found, "__module__", None) == module, f"{name} is {found.__module__}'s"


def test_every_module_of_the_operations_layer_is_in_the_table() -> None:
    """A new module of ``warren_cron.ops`` is listed with its operations."""
    modules = {
        f"warren_cron.ops.{info.name}" for info in pkgutil.iter_modules(warren_cron.ops.__path__)
    }
    assert modules - {module for _, module in table_rows()} == set()
