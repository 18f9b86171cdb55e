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


def pack(seq_len, num_packing_bins: int = 1, name: str | None = None):
    """A transformation for ``ds.apply``: variable-length sequences concatenated into
    rows of ``seq_len`` values, with segment ids (1, 2, ... per row, 0 on padding) and
    positions (0, 1, ... within each sequence), as packed language-model batches need.

    The element is one 1-D numeric sequence, giving ``(values, segment_ids,
    positions)``, or a dict of them packed together (``seq_len`` an int or a dict per
    feature), giving the dict with ``name``, ``name_segment_ids`` and
    ``name_positions`` for each feature; padding is 0 everywhere. Placement is
    first-fit over ``num_packing_bins`` open rows, all finished (in the order they
    opened) when a sequence fits none and no more may open; 1 (the default) is a
    greedy sequential packer. A sequence longer than a row is truncated to it; one
    whose features are all empty is left out. Deterministic, compiled, and saved and
    restored exactly with the iterator (details: ``nbdata/ops/pack.py``).

    >>> import numpy as np, nbdata as nd
    >>> ds = nd.Dataset.from_generator(lambda: iter([np.array([1, 2]), np.array([3]),
    ...                                              np.array([4, 5, 6])]),
    ...                                output_signature=nd.TensorSpec((None,), np.int64))
    >>> [[a.tolist() for a in row] for row in ds.apply(nd.experimental.pack(3))]
    [[[1, 2, 3], [1, 1, 2], [0, 1, 0]], [[4, 5, 6], [1, 1, 1], [0, 1, 2]]]
    """
    from nbdata.dataset import Dataset
    from nbdata.ops.pack import pack_node

    def apply(ds):
        if not isinstance(ds, Dataset):
            raise TypeError(f"pack: expected a Dataset, got {type(ds).__name__}")
        return ds._derive(pack_node(ds._node, seq_len, num_packing_bins, name=name))
    return apply


__all__ = ["assert_cardinality", "at", "copy_to_device", "global_shuffle", "pack", "prefetch_to_device",
           "service"] + _more
