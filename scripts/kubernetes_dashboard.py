"""Write the Grafana dashboard's ConfigMap for Kubernetes from deploy/grafana/dashboards/.

    python scripts/kubernetes_dashboard.py           write it
    python scripts/kubernetes_dashboard.py --check   exit 1 if it is stale

tests/test_kubernetes_manifests.py runs ``--check``: it fails while the ConfigMap differs from
the JSON.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD_JSON = ROOT / "deploy" / "grafana" / "dashboards" / "warren.json"
CONFIGMAP = (
    ROOT / "deploy" / "kubernetes" / "components" / "observability" / "grafana-dashboard.yaml"
)
EXIT_STALE = 1


def configmap(dashboard: str) -> str:
    """The dashboard JSON as a ConfigMap that Grafana's dashboard sidecar loads."""
    lines = "\n".join(f"    {line}" if line else "" for line in dashboard.rstrip("\n").split("\n"))
    return (
        "# Generated from deploy/grafana/dashboards/warren.json by\n"
        "# `python scripts/kubernetes_dashboard.py`: edit the JSON, then run it again.\n"
        "apiVersion: v1\n"
        "kind: ConfigMap\n"
        "metadata:\n"
        "  name: warren-grafana-dashboard\n"
        "  labels:\n"
        '    grafana_dashboard: "1"\n'
        "data:\n"
        "  warren.json: |\n"
        f"{lines}\n"
    )


def main(argv: list[str]) -> int:
    """Write the ConfigMap, or with ``--check`` say whether it is fresh."""
    wanted = configmap(DASHBOARD_JSON.read_text())
    if "--check" in argv:
        fresh = CONFIGMAP.exists() and CONFIGMAP.read_text() == wanted
        print(f"{CONFIGMAP}: {'fresh' if fresh else 'stale: run without --check'}")
        return 0 if fresh else EXIT_STALE
    CONFIGMAP.write_text(wanted)
    print(f"wrote {CONFIGMAP}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
