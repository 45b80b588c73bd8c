"""docker-compose.yml and the image: every command runs something real, every variable exists."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from warren_cron.cli.main import SUBCOMMANDS
from warren_cron.runtime import settings_doc

ROOT = Path(__file__).resolve().parent.parent

COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
WARREN_SERVICES = [name for name, svc in COMPOSE["services"].items() if "build" in svc]
OBSERVABILITY = [
    n for n, s in COMPOSE["services"].items() if "observability" in s.get("profiles", [])
]
DASHBOARD = ROOT / "deploy/grafana/dashboards/warren.json"


def assert_runs_something_real(command: list[str]) -> None:
    """``warren SUBCOMMAND`` names a subcommand; ``python -m MODULE`` a module that imports."""
    if command[0] == "warren":
        assert command[1] in SUBCOMMANDS, command
    else:
        assert command[:2] == ["python", "-m"], command
        assert importlib.util.find_spec(command[2]) is not None, command


@pytest.mark.parametrize("service", WARREN_SERVICES)
def test_every_service_command_runs_something_that_exists(service: str) -> None:
    """Each warren service starts a ``warren`` subcommand or a module of this checkout."""
    assert_runs_something_real(COMPOSE["services"][service]["command"])


@pytest.mark.parametrize("service", WARREN_SERVICES)
def test_every_cron_variable_a_service_sets_is_a_real_setting(service: str) -> None:
    """A misspelt CRON_ variable would be silently ignored: none may appear in compose."""
    env = COMPOSE["services"][service].get("environment") or {}
    unknown = {k for k in env if k.startswith("CRON_")} - settings_doc.all_variables()
    assert not unknown


def test_the_image_default_command_runs_a_subcommand() -> None:
    """The Dockerfile's CMD runs a ``warren`` subcommand, which the image installs."""
    cmd = re.search(r"^CMD (\[.*\])", (ROOT / "Dockerfile").read_text(), re.M)
    assert cmd is not None
    assert_runs_something_real(yaml.safe_load(cmd.group(1)))


def test_services_wait_for_a_healthy_broker_and_have_health_checks() -> None:
    """Nothing that talks to RabbitMQ starts before it is healthy, and every service (the
    observability profile's too) is health-checked."""
    for name, service in COMPOSE["services"].items():
        assert "healthcheck" in service, name
        if name not in ("rabbitmq", "demo-target", *OBSERVABILITY):
            assert service["depends_on"]["rabbitmq"]["condition"] == "service_healthy", name


def test_env_example_and_settings_page_table_match_the_settings_classes() -> None:
    """The settings documentation is generated from the code, so it cannot drift."""
    page = (ROOT / "docs" / "settings.md").read_text()
    assert settings_doc.with_table(page) == page, "run python scripts/settings_doc.py"
    assert (ROOT / ".env.example").read_text() == settings_doc.env_example()


def test_compose_schedules_file_is_valid() -> None:
    """The schedules the compose demo runs pass the scheduler's validation."""
    from warren_cron.runtime.settings import CronSettings
    from warren_cron.schedules.load import load_schedules

    path = ROOT / COMPOSE["services"]["scheduler"]["environment"][
        "CRON_SCHEDULES_FILE"
    ].removeprefix("/app/")
    assert len(load_schedules(path, CronSettings()).schedules) >= 3


def test_the_monitor_serves_the_dashboard_on_the_hosts_loopback_only() -> None:
    """Compose turns the dashboard on, reachable from the host at 127.0.0.1:8088 and from
    nowhere else, over the schedules the scheduler runs."""
    monitor = COMPOSE["services"]["monitor"]
    env = monitor["environment"]
    port = env["CRON_DASHBOARD_PORT"]
    assert int(port) > 0 and env["CRON_DASHBOARD_HOST"] == "0.0.0.0"
    assert monitor["ports"] == [f"127.0.0.1:8088:{port}"]
    scheduler_file = COMPOSE["services"]["scheduler"]["environment"]["CRON_SCHEDULES_FILE"]
    assert env["CRON_SCHEDULES_FILE"] == scheduler_file
    assert "CRON_DASHBOARD_TOKEN" not in env  # a secret belongs in .env, not in the file


def rabbitmq_services() -> dict[str, Any]:
    """The RabbitMQ nodes compose can run, the ``cluster`` profile's included."""
    return {n: s for n, s in COMPOSE["services"].items() if "rabbitmq" in str(s.get("image"))}


def test_the_cluster_profile_runs_three_joinable_nodes() -> None:
    """Three nodes, own hostnames and data volumes, one cookie, one seed they join."""
    nodes = rabbitmq_services()
    assert len(nodes) == 3
    assert [s.get("profiles") for s in nodes.values()].count(["cluster"]) == 2
    assert len({s["hostname"] for s in nodes.values()}) == 3
    assert len({s["volumes"][0].split(":")[0] for s in nodes.values()}) == 3
    assert len({s["environment"]["RABBITMQ_ERLANG_COOKIE"] for s in nodes.values()}) == 1
    conf = (ROOT / "examples/rabbitmq/cluster.conf").read_text()
    seed = re.search(r"classic_config\.nodes\.1 = rabbit@(\S+)", conf)
    assert seed is not None and seed.group(1) in {s["hostname"] for s in nodes.values()}
    for service in nodes.values():
        mount = "./examples/rabbitmq/cluster.conf:/etc/rabbitmq/conf.d/20-cluster.conf:ro"
        assert mount in service["volumes"]


def test_the_nodes_run_the_release_ci_tests_without_partition_handling() -> None:
    """Every node runs RabbitMQ 4.3 (CI's second pass), whose Khepri store makes a minority
    node powerless by itself: no cluster_partition_handling, which 4.3 ignores."""
    tags = {str(s["image"]).partition(" ")[0] for s in rabbitmq_services().values()}
    assert tags == {"rabbitmq:4.3-management"}
    conf = (ROOT / "examples/rabbitmq/cluster.conf").read_text()
    settings = [line for line in conf.splitlines() if not line.startswith("#")]
    assert not [line for line in settings if "partition_handling" in line]


@pytest.mark.parametrize("service", WARREN_SERVICES)
def test_warren_services_are_given_every_node(service: str) -> None:
    """CRON_AMQP_URL lists each RabbitMQ node of compose, the seed first, and parses."""
    from warren_cron.runtime.settings import CronSettings

    url = COMPOSE["services"][service]["environment"]["CRON_AMQP_URL"]
    hosts = [urlsplit(node).hostname for node in CronSettings(amqp_url=url).urls]
    assert hosts == [s["hostname"] for s in rabbitmq_services().values()]


def exported_names() -> set[str]:
    """Every sample name the code's Prometheus metrics can export."""
    from prometheus_client.metrics import MetricWrapperBase

    from warren_cron.runtime import metrics

    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"], "gauge": [""]}
    found = [m for m in vars(metrics).values() if isinstance(m, MetricWrapperBase)]
    return {f.name + end for m in found for f in m.describe() for end in suffixes[f.type]}


def dashboard_queries() -> list[str]:
    """Every PromQL expression of the Grafana dashboard's panels."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p.get("targets", [])]


def test_every_metric_the_grafana_dashboard_queries_exists_in_the_code() -> None:
    """A renamed metric would leave a panel silently empty."""
    queried = {name for expr in dashboard_queries() for name in re.findall(r"\bcron_\w+", expr)}
    assert queried and queried <= exported_names(), queried - exported_names()
    assert {"cron_scheduler_leading", "cron_scheduler_lag_seconds"} <= queried


def test_the_observability_profile_runs_prometheus_and_grafana_provisioned() -> None:
    """Both health-checked, on the host's loopback only, every mounted file present, the
    dashboard's data source the provisioned one, every warren process scraped."""
    assert sorted(OBSERVABILITY) == ["grafana", "prometheus"]
    for name in OBSERVABILITY:
        service = COMPOSE["services"][name]
        assert service["healthcheck"]["test"][0] == "CMD", name
        assert all(port.startswith("127.0.0.1:") for port in service["ports"]), name
        for mount in service["volumes"]:
            source = mount.split(":")[0]
            assert not source.startswith("./") or (ROOT / source).exists(), mount
    sources = yaml.safe_load(
        (ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text()
    )
    panels = json.loads(DASHBOARD.read_text())["panels"]
    uids = {p["datasource"]["uid"] for p in panels if p["type"] != "row"}
    assert uids == {sources["datasources"][0]["uid"]}
    scrape = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    [dns] = scrape["scrape_configs"][0]["dns_sd_configs"]
    assert sorted(dns["names"]) == sorted(n for n in WARREN_SERVICES if n != "demo-target")
    ports = {COMPOSE["services"][n]["environment"]["CRON_METRICS_PORT"] for n in dns["names"]}
    assert ports == {str(dns["port"])}
