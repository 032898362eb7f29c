"""The Ray executor's runtime: joining (or starting) the Ray cluster, and checking, before any work, that the
store is on storage every node sees.

Every stage of a Ray run reads and writes docpipe's content-addressed store by path (sources, extraction records,
indexes), so the store must be one shared filesystem mounted at the same path on every node (NFS, EFS, a
ReadWriteMany volume). `check_shared_store` proves it: the driver writes a marker with a random token, and a task
pinned to each alive node must read the same token back. The answer cache that holds review cells must be
reachable from the driver only (it writes them), so SQLite under the store is fine.

Imports ray only when called: ``pip install 'docpipe-contracts[ray]'``.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from pathlib import Path
from typing import Any

from docpipe.errors import ConfigError, DependencyError, StoreError

__all__ = ["RAY_INSTALL", "check_shared_store", "connect", "import_ray"]

logger = logging.getLogger(__name__)

RAY_INSTALL = "pip install 'docpipe-contracts[ray]'"
_MARKER_DIR = ".ray-check"


def import_ray() -> Any:
    """Returns the ray module, or a `DependencyError` naming the extra."""
    try:
        import ray
        import ray.data  # noqa: F401 - the pipelines are Ray Data
    except ImportError as exc:
        raise DependencyError(f"the Ray executor needs Ray Data: {RAY_INSTALL}") from exc
    return ray


def connect(address: str | None, *, num_cpus: int | None = None) -> Any:
    """Returns ray, joined to the cluster at `address` ('auto', ray://host:port) or to a local Ray started now
    (`num_cpus` of this machine, all by default); a Ray already initialised in this process is used as it is."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.WARNING,
        "configure_logging": False,
    }
    if address:
        _check_reachable(address)
        kwargs["address"] = address
    elif num_cpus is not None:
        kwargs["num_cpus"] = num_cpus
    try:
        ray.init(**kwargs)
    except ConnectionError as exc:
        raise ConfigError(
            f"cannot join the Ray cluster at {address!r}: {exc}. Start it (ray start --head, or KubeRay) and "
            "give its address (--ray-address auto on a cluster node, or ray://HEAD:10001)"
        ) from exc
    for name in ("ray", "ray.data"):  # Ray logs every operator's state at INFO/DEBUG: keep the caller's log readable
        logging.getLogger(name).setLevel(logging.WARNING)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the CLI draws its own; the library never prints
    context.print_on_execution_start = False
    return ray


def _check_reachable(address: str) -> None:
    """Raises `ConfigError` at once when a host:port (or ray://host:port) address does not answer, instead of
    Ray's two minutes of retries; 'auto' is left to Ray."""
    if address == "auto":
        return
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"cannot read the Ray address {address!r}: give 'auto', HOST:PORT or ray://HOST:10001")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise ConfigError(
            f"cannot join the Ray cluster at {address!r}: nothing answers there ({exc.strerror or exc}). Start it "
            "(ray start --head, or KubeRay) and give its address (--ray-address auto on a cluster node, or "
            "ray://HEAD:10001)"
        ) from exc


def _read_marker(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


def check_shared_store(ray: Any, root: Path) -> int:
    """Raises `ConfigError` unless every alive Ray node reads the store at `root` (an absolute path) as this
    process does; returns the number of nodes checked."""
    if not root.is_absolute():
        raise ConfigError(
            f"the store {root} is a relative path: Ray workers do not share this process's working directory. "
            "Give DOCPIPE_HOME (or --home) as an absolute path on storage every node mounts at the same place"
        )
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    folder = root / _MARKER_DIR
    token = secrets.token_hex(16)
    marker = folder / f"{os.getpid()}-{token[:8]}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        marker.write_text(token, encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"cannot write to the store {root}: {exc.strerror or exc}", path=str(root)) from exc
    try:
        read = ray.remote(num_cpus=0)(_read_marker)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        pending = {
            node["NodeManagerAddress"]: read.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            ).remote(str(marker))
            for node in nodes
        }
        blind = {host: seen for host, seen in ((h, ray.get(ref, timeout=120)) for h, ref in pending.items())}
        blind = {host: seen for host, seen in blind.items() if seen != token}
    finally:
        marker.unlink(missing_ok=True)
    if blind:
        hosts = ", ".join(
            f"{host} ({seen if seen.startswith('unreadable') else 'another file'})" for host, seen in blind.items()
        )
        raise ConfigError(
            f"the store {root} is not the same storage on every Ray node: {hosts}. Put DOCPIPE_HOME on a shared "
            "filesystem mounted at the same path on every node (NFS, EFS, a ReadWriteMany volume)"
        )
    logger.info("store %s is shared by the %d Ray node(s)", root, len(nodes))
    return len(nodes)
