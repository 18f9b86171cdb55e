"""``save`` / ``load`` / ``snapshot``: datasets written to disk in tf.data's directory
layout (a run directory of ``%08d.shard`` files and ``snapshot.metadata``, written
last) with shards in nbdata's own checksummed column format
(``nbdata/kernels/column_file.py``, the format of ``cache(filename)``: every buffer and
header carries a CRC32C, a changed byte is a DataLossError, an incomplete file is never
read). ``save(path)`` writes ``path`` itself (the metadata holds the element spec and
each shard's rows, so ``load(path)`` needs no ``element_spec``); ``snapshot(path)``
writes ``<path>/<fingerprint>/`` during the first complete iteration and reads it in
later ones (also in other processes).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import numpy as np

from nbdata.errors import InvalidArgumentError, NotFoundError
from nbdata.ops.cache import FILE_SUFFIX, FileChunks
from nbdata.ops.node import Node, UnaryNode
from nbdata.spec import SparseTensorSpec, TensorSpec, as_dtype, dtype_name, string

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


# ------------------------------------------------------------------ snapshot

METADATA_NAME = "snapshot.metadata"


def shard_path(run_dir: str, shard: int) -> str:
    return os.path.join(run_dir, "%08d.shard" % shard)


def read_snapshot_metadata(directory: str) -> dict | None:
    """The metadata of a complete snapshot in ``directory`` (``<path>/<fingerprint>``)."""
    path = os.path.join(directory, METADATA_NAME)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            doc = json.load(f)
    except ValueError:
        return None
    return doc if doc.get("finalized") else None


@dataclasses.dataclass(frozen=True, eq=False)
class Snapshot(UnaryNode):
    """``snapshot(path)``: the first complete iteration writes ``<path>/<fingerprint>/``
    (tf.data's layout: a run directory of ``%08d.shard`` files, row ``i`` going to shard
    ``shard_func(i, element)`` — default ``i % num_shards`` — and ``snapshot.metadata``,
    written last); later iterations read the shards back, round robin over them (the
    order of tf.data's default reader, which for the default sharding is the input's
    order) without opening the input. Shards are column files (checksummed)."""

    directory: str = ""
    num_shards: int = 1
    shard_fn: Any = None
    reader: Any = None    # directory -> the node reader_func makes of the shards' datasets
    op = "snapshot"

    def describe(self) -> str:
        return f"{self.label}({self.directory!r})"

    def open_chunks(self, ctx, state=None):
        meta = read_snapshot_metadata(self.directory)
        mode = None if state is None else state["mode"]
        if meta is not None and self.reader is not None and mode in (None, "reader"):
            # a complete snapshot read the way reader_func says (a dataset of the
            # shards' datasets in, the dataset to read out)
            from nbdata import state_check
            return ReaderChunks(ctx.open_chunks(
                self.reader(self.directory),
                None if state is None else state_check.nested(state, "inner")))
        if meta is not None and mode != "write":
            return SnapshotReadChunks(self, meta, 0 if state is None else int(state["pos"]))
        if mode == "read":
            if state.get("start") is None:
                raise NotFoundError(f"restore: the state reads the snapshot {self.directory} "
                                    "and it is gone", self.op)
            state = {"mode": "write", "start": state["start"], "rows": state["pos"]}
        from nbdata.ops.cache import CacheWriterChunks
        return CacheWriterChunks(ctx, self, SnapshotSink(self), state)


class SnapshotSink:
    """Writes rows to the shard files of a new run directory (a temporary name, renamed
    and then recorded in ``snapshot.metadata`` when the input ended)."""

    def __init__(self, node: Snapshot):
        import uuid
        from nbdata.kernels.column_file import ColumnFileWriter
        self.node = node
        os.makedirs(node.directory, exist_ok=True)
        self.run = uuid.uuid4().hex
        self.tmp = os.path.join(node.directory, f".{self.run}.tmp")
        os.makedirs(self.tmp, exist_ok=True)
        self.writers: dict = {}
        self.counts: dict = {}
        self.index = 0
        self.done = False
        self._writer_type = ColumnFileWriter

    def _writer(self, shard: int):
        w = self.writers.get(shard)
        if w is None:
            w = self.writers[shard] = self._writer_type(shard_path(self.tmp, shard))
            self.counts[shard] = 0
        return w

    def write(self, chunk) -> None:
        n = chunk.n
        if n == 0:
            return
        index = np.arange(self.index, self.index + n, dtype=np.int64)
        self.index += n
        if self.node.shard_fn is None:
            shards = index % self.node.num_shards
        else:
            from nbdata.chunks import chunk_elements
            shards = np.array([int(self.node.shard_fn(int(i), e)) for i, e in
                               zip(index, chunk_elements(chunk, self.node.spec))], np.int64)
        for s in np.unique(shards).tolist():
            rows = np.flatnonzero(shards == s)
            part = chunk if len(rows) == n else chunk.take(rows)
            self._writer(int(s)).write(part.columns, part.n)
            self.counts[int(s)] += part.n

    def finish(self, start=None) -> None:
        if self.done:
            return
        self.done = True
        for w in self.writers.values():
            w.close()
        final = os.path.join(self.node.directory, self.run)
        os.replace(self.tmp, final)
        shards = sorted(self.counts)
        doc = {"version": 1, "finalized": True, "run_id": self.run,
               "spec": spec_to_json(self.node.spec), "shards": shards,
               "counts": [self.counts[s] for s in shards]}
        tmp = os.path.join(self.node.directory, METADATA_NAME + ".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, os.path.join(self.node.directory, METADATA_NAME))

    def abandon(self) -> None:
        if self.done:
            return
        self.done = True
        import shutil
        for w in self.writers.values():
            w.abandon()
        shutil.rmtree(self.tmp, ignore_errors=True)


class SnapshotReadChunks:
    """Rows of a complete snapshot, round robin over its shards (a shard that ended is
    skipped). State: rows read."""

    def __init__(self, node, meta: dict, pos: int):
        from nbdata.ops.runtime import RowQueue
        self.node, self.meta, self.pos = node, meta, pos
        run = os.path.join(node.directory, meta["run_id"])
        self.paths = [shard_path(run, s) for s in meta["shards"]]
        counts = np.asarray(meta["counts"], np.int64)
        shard_of = np.repeat(np.arange(len(counts)), counts)
        offset = np.concatenate([np.arange(c) for c in counts]) if len(counts) else \
            np.zeros(0, np.int64)
        order = np.lexsort((shard_of, offset))     # by offset, then shard: round robin
        self.shard_of = shard_of[order]
        self.total = len(order)
        self.readers: list = [None] * len(self.paths)
        self.queues = [RowQueue() for _ in self.paths]
        self.skip = np.bincount(self.shard_of[:pos], minlength=len(self.paths)) if pos else \
            np.zeros(len(self.paths), np.int64)

    def _rows(self, s: int, k: int):
        from nbdata.ops.cache import _open_file
        from nbdata.chunks import Chunk
        q = self.queues[s]
        if self.readers[s] is None:
            self.readers[s] = _open_file(self.paths[s], self.node.spec).chunks()
        while q.n < k + int(self.skip[s]):
            columns, rows = next(self.readers[s])
            q.add(Chunk(columns, rows))
        if self.skip[s]:
            q.take(int(self.skip[s]))
            self.skip[s] = 0
        return q.take(k)

    def next(self, want: int):
        from nbdata.chunks import chunk_elements, chunk_from_elements, concat_chunks
        if self.pos >= self.total:
            return None
        lo, hi = self.pos, min(self.total, self.pos + want)
        shards = self.shard_of[lo:hi]
        parts, base, where = [], 0, np.empty(hi - lo, np.int64)
        for s in np.unique(shards).tolist():
            rows = np.flatnonzero(shards == s)
            parts.append(self._rows(int(s), len(rows)))
            where[rows] = np.arange(base, base + len(rows))
            base += len(rows)
        self.pos = hi
        try:
            return concat_chunks(parts).take(where)
        except Exception:  # noqa: BLE001 - columns of different kinds
            elements = [e for p in parts for e in chunk_elements(p, self.node.spec)]
            return chunk_from_elements([elements[i] for i in where.tolist()], self.node.spec)

    def save(self) -> dict:
        return {"mode": "read", "pos": self.pos, "start": None}

    def close(self) -> None:
        self.readers = [None] * len(self.paths)


class ReaderChunks:
    """A complete snapshot read through its ``reader_func``'s dataset. State: that
    dataset's, tagged so a restore reads the same way."""

    def __init__(self, it):
        self.it = it

    def next(self, want: int):
        return self.it.next(want)

    def save(self) -> dict:
        return {"mode": "reader", "inner": self.it.save()}

    def close(self) -> None:
        self.it.close()


@dataclasses.dataclass(frozen=True, eq=False)
class SavedShards(Node):
    """The rows ``save(path)`` wrote (a finalized snapshot directory), round robin over
    its shards; ``shard`` (not None) reads that one shard alone (the datasets a
    ``reader_func`` gets)."""

    directory: str
    element_spec: Any
    count: int = -2
    shard: Any = None
    op = "load"

    @property
    def spec(self):
        return self.element_spec

    def describe(self) -> str:
        which = "" if self.shard is None else f", shard={self.shard}"
        return f"{self.label}({self.directory!r}{which})"

    def cardinality(self) -> int:
        return self.count

    def open_chunks(self, ctx, state=None):
        meta = read_snapshot_metadata(self.directory)
        if meta is None:
            raise NotFoundError(f"load: no dataset saved at {self.directory!r}", "load")
        if self.shard is not None:
            k = meta["shards"].index(self.shard)
            meta = dict(meta, shards=[self.shard], counts=[meta["counts"][k]])
        return SnapshotReadChunks(self, meta, 0 if state is None else int(state["pos"]))


def load_metadata(path: str) -> tuple[Any, dict]:
    """(element spec, metadata) of a dataset ``save(path)`` wrote."""
    meta = read_snapshot_metadata(path)
    if meta is None:
        raise NotFoundError(f"load: no dataset saved at {path!r} (save(path) writes "
                            f"{METADATA_NAME} and the shards there)", "load")
    try:
        return spec_from_json(meta["spec"]), meta
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidArgumentError(f"load: the metadata in {path} is not readable: {e}",
                                   "load") from None
