"""docker-compose.yml and the image: every command runs something real, every variable exists."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import settings_doc
import yaml

ROOT = Path(__file__).resolve().parent.parent

COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
WARREN_SERVICES = [name for name, svc in COMPOSE["services"].items() if "build" in svc]


def module_of(command: list[str]) -> str:
    """The module a ``python -m MODULE`` command runs."""
    assert command[:2] == ["python", "-m"], command
    return command[2]


@pytest.mark.parametrize("service", WARREN_SERVICES)
def test_every_service_command_runs_a_module_that_exists(service: str) -> None:
    """Each warren service starts a module that imports from this checkout."""
    module = module_of(COMPOSE["services"][service]["command"])
    assert importlib.util.find_spec(module) is not None, module


@pytest.mark.parametrize("service", WARREN_SERVICES)
def test_every_cron_variable_a_service_sets_is_a_real_setting(service: str) -> None:
    """A misspelt CRON_ variable would be silently ignored: none may appear in compose."""
    env = COMPOSE["services"][service].get("environment") or {}
    unknown = {k for k in env if k.startswith("CRON_")} - settings_doc.all_variables()
    assert not unknown


def test_the_image_default_command_and_entry_points_import() -> None:
    """The Dockerfile's CMD names a module that exists, as do the ops scripts it ships."""
    cmd = re.search(r"^CMD (\[.*\])", (ROOT / "Dockerfile").read_text(), re.M)
    assert cmd is not None
    assert importlib.util.find_spec(module_of(yaml.safe_load(cmd.group(1)))) is not None
    for script in ("enqueue.py", "failed.py", "queues.py"):
        assert (ROOT / "scripts" / script).exists(), script


def test_services_wait_for_a_healthy_broker_and_have_health_checks() -> None:
    """Nothing starts before RabbitMQ is healthy, and every service is health-checked."""
    for name, service in COMPOSE["services"].items():
        assert "healthcheck" in service, name
        if name not in ("rabbitmq", "demo-target"):
            assert service["depends_on"]["rabbitmq"]["condition"] == "service_healthy", name


def test_env_example_and_readme_table_match_the_settings_classes() -> None:
    """The settings documentation is generated from the code, so it cannot drift."""
    readme = (ROOT / "README.md").read_text()
    assert settings_doc.with_table(readme) == readme, "run python scripts/settings_doc.py"
    assert (ROOT / ".env.example").read_text() == settings_doc.env_example()


def test_compose_schedules_file_is_valid() -> None:
    """The schedules the compose demo runs pass the scheduler's validation."""
    from topology.runtime.settings import CronSettings
    from topology.schedules.load import load_schedules

    path = ROOT / COMPOSE["services"]["scheduler"]["environment"][
        "CRON_SCHEDULES_FILE"
    ].removeprefix("/app/")
    assert len(load_schedules(path, CronSettings()).schedules) >= 3
