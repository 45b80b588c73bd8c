"""The Kubernetes manifests (deploy/kubernetes/, docs/kubernetes.md): every variant renders and
validates offline, and holds to what the processes read, serve and need."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.kubernetes import (
    MANIFESTS,
    RELEASES,
    VARIANTS,
    Manifest,
    dashboard_fresh,
    name_of,
    problems,
    render,
)
from tests.test_shutdown_drain import EXIT_MARGIN_SECONDS
from warren_cron.names import Names
from warren_cron.runtime.probes import PROBE_PATHS
from warren_cron.runtime.settings_doc import all_variables

#: Settings that hold secrets: only ever set from a Secret, never written in a manifest.
SECRET_SETTINGS = {"CRON_AMQP_URL", "CRON_API_TOKENS", "CRON_DASHBOARD_TOKEN"}


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[Manifest]]:
    """Every variant, rendered once for the module."""
    return {variant: render(variant) for variant in VARIANTS}


def of_kind(docs: list[Manifest], kind: str) -> list[Manifest]:
    """The objects of one kind."""
    return [doc for doc in docs if doc["kind"] == kind]


def containers(docs: list[Manifest]) -> Iterator[tuple[Manifest, dict[str, Any]]]:
    """Each Deployment with each of its containers."""
    for deployment in of_kind(docs, "Deployment"):
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            yield deployment, container


def settings(docs: list[Manifest]) -> dict[str, str]:
    """The CRON_* settings of the ConfigMap every process reads."""
    [config] = [
        doc for doc in of_kind(docs, "ConfigMap") if doc["metadata"]["name"] == "warren-settings"
    ]
    data: dict[str, str] = config["data"]
    return data


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_validates_on_every_supported_release(
    rendered: dict[str, list[Manifest]], variant: str
) -> None:
    """Core objects against each release's strict schema, custom resources against their CRD."""
    found = [p for doc in rendered[variant] for release in RELEASES for p in problems(doc, release)]
    assert found == []


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("ScaledObject", ("spec", "minReplicas"), 1),  # KEDA's name is minReplicaCount
        ("ServiceMonitor", ("spec", "endpoints", 0, "scrapeInterval"), "15s"),
        ("RabbitmqCluster", ("spec", "replica"), 3),
        ("Deployment", ("spec", "template", "spec", "terminationGracePeriod"), 45),
        ("HorizontalPodAutoscaler", ("spec", "minReplicas"), "one"),
    ],
)
def test_a_misspelt_or_mistyped_field_is_refused(
    rendered: dict[str, list[Manifest]], kind: str, path: tuple[Any, ...], value: Any
) -> None:
    """Validation would catch a field the cluster would silently drop or refuse."""
    docs = [doc for docs in rendered.values() for doc in docs]
    doc = copy.deepcopy(next(doc for doc in docs if doc["kind"] == kind))
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    assert problems(doc, RELEASES[-1]) != []


def test_every_cron_variable_written_in_the_manifests_is_a_real_setting() -> None:
    """A CRON_* name in any manifest file, comments included, is one a process reads."""
    names = {
        (path.relative_to(MANIFESTS), name)
        for path in MANIFESTS.rglob("*.yaml")
        for name in re.findall(r"\bCRON_[A-Z0-9_]+", path.read_text())
    }
    assert names, "no CRON_ variable found: the scan reads the wrong folder"
    assert {(path, name) for path, name in names if name not in all_variables()} == set()


def test_every_probe_points_at_a_served_path_on_the_metrics_port(
    rendered: dict[str, list[Manifest]],
) -> None:
    """Startup, liveness and readiness on every process, on paths the metrics server answers,
    on the port CRON_METRICS_PORT sets."""
    docs = rendered["base"]
    port = int(settings(docs)["CRON_METRICS_PORT"])
    found = set()
    for deployment, container in containers(docs):
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["metrics"] == port, name_of(deployment)
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            get = container[probe]["httpGet"]
            assert get["path"] in PROBE_PATHS and get["port"] == "metrics"
            found.add((deployment["metadata"]["name"], probe, get["path"]))
    assert {(name, path) for name, _, path in found if path == "/livez"} == {
        ("warren-worker", "/livez"),
        ("warren-scheduler", "/livez"),
        ("warren-monitor", "/livez"),
    }


def test_the_workers_grace_period_covers_the_shutdown_grace_and_its_exit_margin(
    rendered: dict[str, list[Manifest]],
) -> None:
    """SIGKILL never comes before a draining worker could end its attempts and exit."""
    for variant, docs in rendered.items():
        if not of_kind(docs, "Deployment"):
            continue
        grace = float(settings(docs)["CRON_SHUTDOWN_GRACE_SECONDS"])
        [worker] = [
            d for d in of_kind(docs, "Deployment") if d["metadata"]["name"] == "warren-worker"
        ]
        period = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert period >= grace + EXIT_MARGIN_SECONDS, variant


def test_secrets_come_from_secret_references_only(rendered: dict[str, list[Manifest]]) -> None:
    """No Secret is shipped; the broker URL and tokens are secretKeyRefs, never values or
    ConfigMap entries."""
    for docs in rendered.values():
        assert of_kind(docs, "Secret") == []
        for deployment, container in containers(docs):
            env = {e["name"]: e for e in container.get("env", [])}
            assert "CRON_AMQP_URL" in env, name_of(deployment)
            for name in SECRET_SETTINGS & env.keys():
                assert set(env[name]) == {"name", "valueFrom"}, name
                assert "secretKeyRef" in env[name]["valueFrom"], name
        if of_kind(docs, "Deployment"):
            assert SECRET_SETTINGS & settings(docs).keys() == set()


def test_every_pod_runs_restricted_without_a_token_and_with_requests_and_limits(
    rendered: dict[str, list[Manifest]],
) -> None:
    """Non-root, read-only root filesystem, no capability, RuntimeDefault seccomp, no service
    account token, and CPU and memory requested and bounded."""
    docs = rendered["base"]
    [account] = of_kind(docs, "ServiceAccount")
    assert account["automountServiceAccountToken"] is False
    for deployment, container in containers(docs):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["serviceAccountName"] == account["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        for kind in ("requests", "limits"):
            assert set(container["resources"][kind]) == {"cpu", "memory"}, name_of(deployment)


def test_keda_scales_workers_on_the_ready_messages_of_the_main_queue(
    rendered: dict[str, list[Manifest]],
) -> None:
    """The trigger reads the main queue of the configured namespace, as a length over AMQP."""
    docs = rendered["overlays/keda"]
    [scaled] = of_kind(docs, "ScaledObject")
    [trigger] = scaled["spec"]["triggers"]
    names = Names(settings(docs)["CRON_NAMESPACE"])
    assert trigger["type"] == "rabbitmq"
    assert trigger["metadata"]["queueName"] == names.main_queue
    assert trigger["metadata"]["mode"] == "QueueLength"
    assert trigger["metadata"]["protocol"] == "amqp"
    assert scaled["spec"]["scaleTargetRef"]["name"] == "warren-worker"
    assert 1 <= scaled["spec"]["minReplicaCount"] < scaled["spec"]["maxReplicaCount"]
    [auth] = of_kind(docs, "TriggerAuthentication")
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    [hpa] = of_kind(rendered["overlays/hpa"], "HorizontalPodAutoscaler")
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"


def test_two_schedulers_with_a_budget_that_always_keeps_one(
    rendered: dict[str, list[Manifest]],
) -> None:
    """A leader and a standby; a voluntary disruption leaves at least one."""
    docs = rendered["base"]
    [scheduler] = [d for d in of_kind(docs, "Deployment") if "scheduler" in d["metadata"]["name"]]
    assert scheduler["spec"]["replicas"] == 2
    budgets = {d["metadata"]["name"]: d["spec"] for d in of_kind(docs, "PodDisruptionBudget")}
    assert budgets["warren-scheduler"] == {
        "minAvailable": 1,
        "selector": scheduler["spec"]["selector"],
    }
    assert set(budgets) == {"warren-worker", "warren-scheduler", "warren-monitor"}


def test_the_broker_example_runs_three_nodes_and_the_workers_quorum_queues(
    rendered: dict[str, list[Manifest]],
) -> None:
    """Three RabbitMQ nodes, a consumer timeout equal to the workers' setting, quorum queues."""
    [cluster] = rendered["rabbitmq"]
    assert cluster["spec"]["replicas"] == 3
    config = cluster["spec"]["rabbitmq"]["additionalConfig"]
    [timeout_ms] = re.findall(r"^consumer_timeout = (\d+)$", config, re.MULTILINE)
    values = settings(rendered["base"])
    assert int(timeout_ms) == float(values["CRON_CONSUMER_TIMEOUT_SECONDS"]) * 1000
    assert values["CRON_QUEUE_TYPE"] == "quorum"


def test_the_grafana_dashboard_configmap_is_fresh(rendered: dict[str, list[Manifest]]) -> None:
    """The ConfigMap holds the dashboard JSON as it is now; run
    scripts/kubernetes_dashboard.py after changing the JSON."""
    checked = dashboard_fresh()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    production = rendered["overlays/production"]
    assert "ServiceMonitor" in {doc["kind"] for doc in production}
    assert any(d["metadata"]["name"] == "warren-grafana-dashboard" for d in production)
