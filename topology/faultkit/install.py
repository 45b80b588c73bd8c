"""Which RabbitMQ a private node runs: the installed ``rabbitmq-server`` (3.x), or with
``WARREN_RABBITMQ=4.0`` (or ``4``) or ``4.3`` a Debian root of that release that
``rabbitmq_root.sh`` (beside this module) builds and caches, run in a chroot."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
#: Builds and mounts the 4.x roots; shipped beside this module.
ROOT_SCRIPT = Path(__file__).with_name("rabbitmq_root.sh")
#: The releases a private node runs, by the names ``WARREN_RABBITMQ`` accepts for them.
RELEASES = {"3": "3", "4": "4.0", "4.0": "4.0", "4.3": "4.3"}


def release_of(value: str) -> str:
    """``3``, ``4.0`` or ``4.3`` for a ``WARREN_RABBITMQ`` value (``4`` stays 4.0)."""
    try:
        return RELEASES[value.strip() or "3"]
    except KeyError:
        raise BrokerNodeError(
            f"WARREN_RABBITMQ={value!r}: give 3 (this machine's), 4.0 (or 4) or 4.3"
        ) from None


def release() -> str:
    """The release private nodes run: ``WARREN_RABBITMQ`` (3, 4.0 or 4.3), else 3."""
    return release_of(os.environ.get("WARREN_RABBITMQ", "3"))


class Install:
    """Where a release's binaries are: the machine's own (3.x), or a chroot root (4.x)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root

    @classmethod
    def of(cls, version: str) -> Install:
        """The installed 3.x, or the cached root of a 4.x release (built on first use)."""
        chosen = release_of(version)
        if chosen == "3":
            return cls()
        built = subprocess.run(
            ["bash", str(ROOT_SCRIPT), chosen, "root"],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if built.returncode != 0:
            raise BrokerNodeError(f"{ROOT_SCRIPT} {chosen} root failed:\n{built.stderr[-2000:]}")
        return cls(Path(built.stdout.strip().splitlines()[-1]))

    def command(self, program: str, *args: str) -> list[str]:
        """``program`` run from this install (in its chroot, if any)."""
        return [*(["chroot", str(self.root)] if self.root else []), program, *args]

    def outside(self, inner: str) -> Path:
        """The host's path of ``inner``, a path as a node of this install sees it."""
        return Path(f"{self.root}{inner}") if self.root else Path(inner)

    def place(self, base: Path) -> tuple[Path, str]:
        """Where a node with data dir ``base`` keeps its files: on this host, and as it sees it."""
        if self.root is None:
            return base, str(base)
        inner = f"/warren/{base.name}-{uuid.uuid4().hex[:6]}"
        return Path(f"{self.root}{inner}"), inner


class BrokerNodeError(RuntimeError):
    """The private node did not start or stop as asked."""


def available() -> bool:
    """True when this machine can run a private node."""
    return Path(SERVER).exists() and Path(CTL).exists()
