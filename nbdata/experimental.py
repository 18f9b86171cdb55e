"""``nd.experimental``: names tf.data keeps under ``tf.data.experimental``."""

from nbdata.dataset import at, global_shuffle
from nbdata.distribute import service
from nbdata.experimental_more import *  # noqa: F401,F403 - tf.data.experimental's other names
from nbdata.experimental_more import __all__ as _more
from nbdata.experimental_more import __getattr__  # noqa: F401 - the CSV/Example readers, on first use


def assert_cardinality(expected_cardinality):
    """A transformation for ``ds.apply``: ``ds.assert_cardinality(expected_cardinality)``
    (``tf.data.experimental.assert_cardinality``)."""
    return lambda ds: ds.assert_cardinality(expected_cardinality)


def prefetch_to_device(device: str, buffer_size=None):
    """A transformation for ``ds.apply``: ``ds.prefetch_to_device(device, buffer_size)``
    (``tf.data.experimental.prefetch_to_device``; ``buffer_size`` None: 2)."""
    return lambda ds: ds.prefetch_to_device(device, 2 if buffer_size is None else buffer_size)


def copy_to_device(target_device: str, source_device: str = "/cpu:0"):
    """A transformation for ``ds.apply`` copying each element to ``target_device``
    (``tf.data.experimental.copy_to_device``): ``prefetch_to_device`` with one batch of
    buffer. ``source_device`` must be the CPU."""
    if str(source_device).strip().lower().lstrip("/") not in ("cpu:0", "cpu", "device:cpu:0"):
        raise ValueError(f"copy_to_device: the source device must be the CPU, got {source_device!r}")
    return lambda ds: ds.prefetch_to_device(target_device, 1)


__all__ = ["assert_cardinality", "at", "copy_to_device", "global_shuffle", "prefetch_to_device", "service"] + _more
