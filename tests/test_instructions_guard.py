"""The hot path's guard: a path whose instructions per task grew past +3 % of the baseline
(ours over the minimal consumer) fails CI, naming it; one within the tolerance passes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def guard() -> ModuleType:
    """``scripts/instructions_guard.py`` as a module (scripts are no package)."""
    spec = importlib.util.spec_from_file_location("guard", ROOT / "scripts/instructions_guard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_path_grown_past_the_tolerance_fails_and_one_within_passes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """+5 % fails with the path and the figures named; +2 % and a fall pass."""
    module = guard()
    before = {"ours": 650_000, "raw": 740_000, "ratio": 0.8784}
    grown = {"ours": 682_500, "raw": 740_000, "ratio": 0.9223}
    why = module.verdict("noop", grown, before)
    assert why is not None and "noop" in why and "682,500" in why and "+5.0%" in why
    assert module.verdict("noop", {**grown, "ratio": 0.8960}, before) is None
    assert module.verdict("noop", {**grown, "ratio": 0.80}, before) is None
    assert "baseline 0.8784" in capsys.readouterr().out


def test_the_committed_baseline_has_every_path_the_guard_measures() -> None:
    """Each path with ours, the minimal consumer and their ratio, as the guard writes them."""
    module = guard()
    baseline = json.loads((ROOT / "scripts/instructions_baseline.json").read_text())
    assert set(baseline) == set(module.PATHS)
    for figures in baseline.values():
        assert figures["ratio"] == pytest.approx(figures["ours"] / figures["raw"], abs=1e-4)
