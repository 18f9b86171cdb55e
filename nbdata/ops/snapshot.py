"""``save`` / ``load`` / ``snapshot``: datasets written to disk in nbdata's own checksummed
column format (``nbdata/kernels/column_file.py``, the format of ``cache(filename)``:
every buffer and header carries a CRC32C, a changed byte is a DataLossError, an
incomplete file is never read).

``save(path)`` writes the directory ``path`` holding ``data.nbcache`` (written to a
temporary name and renamed when complete) and ``dataset_spec.json`` (the element spec
and the element count), so ``load(path)`` needs no ``element_spec``. ``snapshot(path)``
is a file cache under ``path`` named by the input pipeline's fingerprint: the first
complete iteration writes it, later iterations (also in other processes) read it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import numpy as np

from nbdata.errors import InvalidArgumentError, NotFoundError
from nbdata.ops.cache import FILE_SUFFIX, FileChunks
from nbdata.ops.node import Node
from nbdata.spec import SparseTensorSpec, TensorSpec, as_dtype, dtype_name, string

DATA_NAME = "data"
SPEC_NAME = "dataset_spec.json"


def spec_to_json(spec: Any) -> Any:
    if isinstance(spec, TensorSpec):
        return {"tensor": [None if spec.shape is None else list(spec.shape),
                           "string" if spec.dtype is string else dtype_name(spec.dtype)]}
    if isinstance(spec, SparseTensorSpec):
        raise TypeError("save: sparse components cannot be saved")
    if isinstance(spec, tuple):
        return {"tuple": [spec_to_json(s) for s in spec]}
    if isinstance(spec, dict):
        return {"dict": [[k, spec_to_json(v)] for k, v in spec.items()]}
    raise TypeError(f"save: cannot save elements with a {type(spec).__name__} component")


def spec_from_json(doc: Any) -> Any:
    if "tensor" in doc:
        shape, dtype = doc["tensor"]
        return TensorSpec(None if shape is None else tuple(shape),
                          string if dtype == "string" else as_dtype(np.dtype(dtype)))
    if "tuple" in doc:
        return tuple(spec_from_json(s) for s in doc["tuple"])
    return {k: spec_from_json(v) for k, v in doc["dict"]}


def write_metadata(path: str, spec: Any, count: int) -> None:
    tmp = os.path.join(path, SPEC_NAME + ".tmp")
    with open(tmp, "w") as f:
        json.dump({"version": 1, "spec": spec_to_json(spec), "cardinality": count}, f)
    os.replace(tmp, os.path.join(path, SPEC_NAME))


def read_metadata(path: str) -> tuple[Any, int]:
    meta = os.path.join(path, SPEC_NAME)
    if not os.path.exists(os.path.join(path, DATA_NAME + FILE_SUFFIX)) or not os.path.exists(meta):
        raise NotFoundError(f"load: no dataset saved at {path!r} (save(path) writes "
                            f"{DATA_NAME}{FILE_SUFFIX} and {SPEC_NAME} there)", "load")
    try:
        with open(meta) as f:
            doc = json.load(f)
        return spec_from_json(doc["spec"]), int(doc["cardinality"])
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidArgumentError(f"load: the metadata {meta} is not readable: {e}",
                                   "load") from None


@dataclasses.dataclass(frozen=True, eq=False)
class Load(Node):
    """The elements of a dataset written by ``save(path)``."""

    path: str
    element_spec: Any
    count: int = -2
    op = "load"

    @property
    def spec(self):
        return self.element_spec

    def describe(self) -> str:
        return f"{self.label}({self.path!r})"

    def cardinality(self) -> int:
        return self.count

    def open_chunks(self, ctx, state=None):
        return FileChunks(os.path.join(self.path, DATA_NAME + FILE_SUFFIX), self.spec,
                          0 if state is None else int(state["pos"]))
