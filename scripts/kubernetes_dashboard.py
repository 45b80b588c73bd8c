"""Write the Grafana dashboard's ConfigMap for Kubernetes from deploy/grafana/dashboards/.

    python scripts/kubernetes_dashboard.py           write it
    python scripts/kubernetes_dashboard.py --check   exit 1 if it is stale

tests/test_kubernetes_manifests.py fails while the ConfigMap differs from the JSON.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.kubernetes import DASHBOARD_CONFIGMAP, dashboard_configmap


def main(argv: list[str]) -> int:
    """Write the ConfigMap, or with ``--check`` say whether it is fresh."""
    wanted = dashboard_configmap()
    if "--check" in argv:
        fresh = DASHBOARD_CONFIGMAP.exists() and DASHBOARD_CONFIGMAP.read_text() == wanted
        print(f"{DASHBOARD_CONFIGMAP}: {'fresh' if fresh else 'stale: run without --check'}")
        return 0 if fresh else 1
    DASHBOARD_CONFIGMAP.write_text(wanted)
    print(f"wrote {DASHBOARD_CONFIGMAP}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
