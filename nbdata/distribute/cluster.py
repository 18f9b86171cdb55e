"""Ray, imported only when a dataset is distributed, and the connection to it."""

from __future__ import annotations

import logging

from nbdata.errors import UnavailableError

_INSTALL = "pip install 'nbdata[distributed]'"
NAMESPACE = "nbdata"


def ray_module():
    """The ``ray`` module, or UnavailableError saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise UnavailableError(f"distribute needs Ray ({_INSTALL}): {e}") from None
    return ray


def connect(address: str | None):
    """Ray, connected: to ``address`` when given, else the instance this process already
    uses, else a local instance started now."""
    ray = ray_module()
    if not ray.is_initialized():
        ray.init(address=address, namespace=NAMESPACE, include_dashboard=False,
                 logging_level=logging.WARNING, configure_logging=True)
    return ray


def cluster_cpus() -> float:
    return float(ray_module().cluster_resources().get("CPU", 1.0))
