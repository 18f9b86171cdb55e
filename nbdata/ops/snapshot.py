"""``save`` / ``load`` / ``snapshot``: datasets written to disk in tf.data's directory
layout (a run directory of ``%08d.shard`` files and ``snapshot.metadata``, written
last) with shards in nbdata's own checksummed column format
(``nbdata/kernels/column_file.py``, the format of ``cache(filename)``: every buffer and
header carries a CRC32C, a changed byte is a DataLossError, an incomplete file is never
read). ``save(path)`` writes ``path`` itself (the metadata holds the element spec and
each shard's rows, so ``load(path)`` needs no ``element_spec``); ``snapshot(path)``
writes ``<path>/<fingerprint>/`` during the first complete iteration and reads it in
later ones (also in other processes).

``compression`` ("GZIP", "SNAPPY") compresses the shards' buffers; the column files
record it (each record names its codec), so reading needs no argument, and the
metadata records it too (``load(path, compression=...)`` with another one is a
DataLossError, as in tf.data, where the reader needs the writer's compression).

``save(path, checkpoint_args=...)`` writes through :class:`SaveWriterChunks`, whose
state is the input's position and the shard files' sizes: restoring it continues the
same temporary run directory (the files cut back to those sizes), so a resumed save
neither reads nor writes again the rows before its checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from typing import Any

import numpy as np

from nbdata import state_check
from nbdata.errors import DataLossError, InvalidArgumentError, NotFoundError
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
    compression: str = ""     # "", "GZIP" or "SNAPPY" (column_file.compression_name)
    resumable: bool = False   # save(checkpoint_args=...): SaveWriterChunks
    op = "snapshot"

    def reads_ahead_freely(self) -> bool:
        return False   # it writes the rows it reads

    def describe(self) -> str:
        return f"{self.label}({self.directory!r})"

    def open_chunks(self, ctx, state=None):
        if self.resumable:
            return SaveWriterChunks(ctx, self, state)
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


RUN_ID = re.compile(r"[0-9a-f]{32}")


def run_tmp_dir(directory: str, run: str) -> str:
    """Where run ``run`` is written until it is complete."""
    return os.path.join(directory, f".{run}.tmp")


class SnapshotSink:
    """Writes rows to the shard files of a new run directory (a temporary name, renamed
    and then recorded in ``snapshot.metadata`` when the input ended). A resumable
    sink (``save(checkpoint_args=...)``) keeps the files of a run it abandons after
    writing rows (a later save resumes it) and :meth:`resume` continues such a run."""

    def __init__(self, node: Snapshot, run: str | None = None):
        import uuid
        from nbdata.kernels.column_file import ColumnFileWriter
        self.node = node
        os.makedirs(node.directory, exist_ok=True)
        self.run = run or uuid.uuid4().hex
        self.tmp = run_tmp_dir(node.directory, self.run)
        os.makedirs(self.tmp, exist_ok=True)
        self.writers: dict = {}
        self.counts: dict = {}
        self.index = 0
        self.done = False
        self.resumed = False
        self._writer_type = ColumnFileWriter

    @classmethod
    def resume(cls, node: Snapshot, state: dict) -> "SnapshotSink":
        """The sink of the run a :meth:`save` state names, its shard files cut back to
        the sizes the state records (and shards begun after it removed)."""
        from nbdata.kernels.column_file import ColumnFileWriter
        run = state["run"]
        tmp = run_tmp_dir(node.directory, run)
        if not os.path.isdir(tmp):
            raise NotFoundError(f"save: cannot resume: the partial run {tmp} the checkpoint "
                                "continues is gone", "save")
        sink = cls(node, run)
        sink.index, sink.resumed = state["index"], True
        for shard, size, rows, names in state["shards"]:
            sink.writers[shard] = ColumnFileWriter.reopen(shard_path(tmp, shard), size, rows,
                                                          names, node.compression)
            sink.counts[shard] = rows
        keep = {os.path.basename(shard_path(tmp, s)) for s in sink.writers}
        for name in os.listdir(tmp):
            if name not in keep:   # a shard begun after the checkpoint
                os.unlink(os.path.join(tmp, name))
        return sink

    def save(self) -> dict:
        """The run, the rows passed and each shard file's size (flushed: those bytes are
        in the file), rows and leaves."""
        shards = []
        for s in sorted(self.writers):
            w = self.writers[s]
            w.flush()
            shards.append([s, w.size, w.total, None if w.names is None else list(w.names)])
        return {"run": self.run, "index": self.index, "shards": shards}

    def _writer(self, shard: int):
        w = self.writers.get(shard)
        if w is None:
            w = self.writers[shard] = self._writer_type(shard_path(self.tmp, shard),
                                                        self.node.compression)
            self.counts[shard] = 0
        return w

    def write(self, chunk):
        """Writes ``chunk`` to its shards; returns it (as a cache's sinks do)."""
        n = chunk.n
        if n == 0:
            return chunk
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
        return chunk

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
               "counts": [self.counts[s] for s in shards],
               "compression": self.node.compression}
        tmp = os.path.join(self.node.directory, METADATA_NAME + ".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, os.path.join(self.node.directory, METADATA_NAME))

    def abandon(self) -> None:
        if self.done:
            return
        self.done = True
        for w in self.writers.values():
            w.abandon()
        if self.node.resumable and (self.resumed or self.counts):
            return   # a later save(checkpoint_args=...) resumes it
        shutil.rmtree(self.tmp, ignore_errors=True)


class SaveWriterChunks:
    """``save(checkpoint_args=...)``'s writer: passes the input's chunks through,
    writing them to the shard files of a run. State: the input's current state, and
    the run, the rows passed and each shard file's size and rows; restoring it cuts the
    files back to those sizes and goes on from there (nothing before it is read or
    written again). An abandoned run keeps its files for the next save to resume."""

    def __init__(self, ctx, node: Snapshot, state=None):
        self.finished = True   # (a state refused below leaves no sink to abandon)
        self.sink = None
        if state is None:
            self.it = ctx.open_chunks(node.input)
            self.sink = SnapshotSink(node)
        elif state_check.choice(state, "mode", ("save", "saved")) == "saved":
            self.it = None     # the run had ended (and was renamed into place)
            return
        else:
            state_check.record(state, "mode", "input", "run", "index", "shards")
            run = state["run"]
            if not isinstance(run, str) or not RUN_ID.fullmatch(run):
                raise state_check.StateFieldError("run", run, "expected a run id")
            state_check.integer(state, "index", 0, state_check.most_rows(node.input))
            shards = state["shards"]
            if not isinstance(shards, list) or not all(
                    isinstance(e, list) and len(e) == 4 for e in shards):
                raise state_check.StateFieldError("shards", shards,
                                                  "expected [shard, size, rows, leaves] lists")
            for shard, size, rows, names in shards:
                state_check.check_int(shard, "shards", None, None)
                state_check.check_int(size, "shards")
                state_check.check_int(rows, "shards", 0, int(state["index"]))
                if names is not None and not (isinstance(names, list) and
                                              all(isinstance(n, str) for n in names)):
                    raise state_check.StateFieldError("shards", names, "expected leaf names")
            self.it = ctx.open_chunks(node.input, state_check.nested(state, "input"))
            try:
                self.sink = SnapshotSink.resume(node, state)
            except BaseException:
                self.it.close()
                raise
        self.finished = False

    def next(self, want: int):
        if self.finished:
            return None
        chunk = self.it.next(want)
        if chunk is None:
            self.finished = True
            self.sink.finish()
            return None
        self.sink.write(chunk)
        return chunk

    def save(self) -> dict:
        if self.finished:
            return {"mode": "saved"}
        return {"mode": "save", "input": self.it.save(), **self.sink.save()}

    def close(self) -> None:
        if not self.finished and self.sink is not None:
            self.sink.abandon()
        if self.it is not None:
            self.it.close()

    def __del__(self):
        if not getattr(self, "finished", True) and getattr(self, "sink", None) is not None:
            self.sink.abandon()


# ------------------------------------------------------- save(checkpoint_args=)

CHECKPOINT_ARGS = frozenset({"directory", "max_to_keep", "keep_checkpoint_every_n_hours",
                             "checkpoint_name", "step_counter", "checkpoint_interval",
                             "init_fn"})
CHECKPOINT_SUFFIX = ".nbsave"
#: Elements between two checkpoints when ``checkpoint_interval`` is not given.
DEFAULT_CHECKPOINT_INTERVAL = 1024


def _save_state_of(doc: Any) -> dict | None:
    """The writer's state (``SaveWriterChunks.save``) inside a decoded iterator state."""
    if isinstance(doc, dict):
        if doc.get("mode") == "save" and "run" in doc and "shards" in doc:
            return doc
        values = doc.values()
    elif isinstance(doc, (list, tuple)):
        values = doc
    else:
        return None
    for v in values:
        found = _save_state_of(v)
        if found is not None:
            return found
    return None


def _between_chunks(it) -> bool:
    """Whether iterator ``it`` handed out every row of the chunk it read last: its state
    then is the writer's after that chunk (a checkpoint there resumes with nothing
    written again; one inside a chunk would write the chunk again)."""
    raw = getattr(it, "_raw", None)
    return raw is None or raw.between_chunks()


class SaveCheckpoints:
    """``save(path, checkpoint_args=...)``: the save's progress checkpointed in
    ``directory`` (tf.train.CheckpointManager's arguments) so that a save that stopped
    resumes when called again.

    Every ``checkpoint_interval`` elements (``DEFAULT_CHECKPOINT_INTERVAL`` when not
    given), at the end of the chunk of rows in progress then, the writer iterator's
    state is written to
    ``<directory>/<checkpoint_name>-<k>.nbsave`` (atomically, after the shard files it
    counts are synced to disk); the newest ``max_to_keep`` are kept (None: all), older
    ones too when ``keep_checkpoint_every_n_hours`` have passed since the previous one
    kept. A save that finds a checkpoint of a save to the same ``path`` resumes from
    the newest: the partial run it names continues (its shards cut back to the
    checkpoint), and the input is restored to the checkpoint's position. When the save
    completes, its checkpoints are removed (and ``directory``, when that leaves it
    empty): a later save starts afresh.
    """

    def __init__(self, args: Any):
        from collections.abc import Mapping
        if not isinstance(args, Mapping):
            raise TypeError(f"save: checkpoint_args must be a dict of "
                            f"tf.train.CheckpointManager's arguments, got {type(args).__name__}")
        if "checkpoint" in args:
            raise ValueError("save: invalid `checkpoint_args`: `checkpoint_args` are not "
                             "allowed to include 'checkpoint' (the save's own iterator is "
                             "what is checkpointed)")
        unknown = sorted(set(args) - CHECKPOINT_ARGS, key=str)
        if unknown:
            raise TypeError(f"save: checkpoint_args got unexpected keys {unknown}; "
                            f"known: {sorted(CHECKPOINT_ARGS)}")
        missing = [k for k in ("directory", "max_to_keep") if k not in args]
        if missing:
            raise TypeError(f"save: checkpoint_args is missing {missing} (the required "
                            "arguments of tf.train.CheckpointManager: directory, where the "
                            "checkpoints go, and max_to_keep, how many to keep, None: all)")
        directory = args["directory"]
        if not isinstance(directory, (str, bytes, os.PathLike)):
            raise TypeError(f"save: checkpoint_args['directory'] must be a path, got "
                            f"{type(directory).__name__}")
        directory = os.fspath(directory)
        self.directory = directory.decode() if isinstance(directory, bytes) else directory
        self.max_to_keep = self._count(args["max_to_keep"], "max_to_keep",
                                       "Expected a positive integer or `None` for `max_to_keep`")
        self.interval = self._count(args.get("checkpoint_interval"), "checkpoint_interval",
                                    "`checkpoint_interval` must be a positive integer or None")
        if self.interval is None:
            self.interval = DEFAULT_CHECKPOINT_INTERVAL
        hours = args.get("keep_checkpoint_every_n_hours")
        if hours is not None and (isinstance(hours, bool) or not isinstance(hours, (int, float))
                                  or not hours > 0):
            raise ValueError(f"save: keep_checkpoint_every_n_hours must be a positive number "
                             f"or None, got {hours!r}")
        self.keep_seconds = None if hours is None else float(hours) * 3600.0
        name = args.get("checkpoint_name", "ckpt")
        if not isinstance(name, str) or not name or os.sep in name:
            raise ValueError(f"save: checkpoint_name must be a file name, got {name!r}")
        self.name = name
        self.step_counter = args.get("step_counter")
        if self.step_counter is not None and not callable(
                getattr(self.step_counter, "assign_add", None)):
            raise TypeError("save: checkpoint_args['step_counter'] must be a variable with "
                            f"assign_add (a tf.Variable), got {type(self.step_counter).__name__}")
        self.pattern = re.compile(re.escape(name) + r"-(\d+)" + re.escape(CHECKPOINT_SUFFIX))

    @staticmethod
    def _count(value, key: str, what: str) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not state_check.is_int(value) or value <= 0:
            raise ValueError(f"save: {what}, got {value!r} (checkpoint_args['{key}'])")
        return int(value)

    # ---------------------------------------------------------------- files
    def _file(self, k: int) -> str:
        return os.path.join(self.directory, f"{self.name}-{k}{CHECKPOINT_SUFFIX}")

    def numbers(self) -> list[int]:
        """The numbers of the checkpoints in ``directory``, oldest first."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(self.pattern.fullmatch, names) if m)

    def read(self, k: int) -> dict:
        from nbdata import checkpoint
        path = self._file(k)
        with open(path, "rb") as f:
            data = f.read()
        try:
            doc = checkpoint.decode(data)
        except DataLossError as e:
            raise DataLossError(f"save: the checkpoint {path} is corrupt: {e.message}; "
                                "delete it to resume from an older one", "save") from None
        if not isinstance(doc, dict) or doc.get("format") != "nbdata.save" or not all(
                k in doc for k in ("path", "run", "elements", "began", "time", "state")):
            raise DataLossError(f"save: {path} is not a checkpoint of a save", "save")
        doc["file"] = path
        return doc

    def _write(self, k: int, doc: dict) -> None:
        from nbdata import checkpoint
        os.makedirs(self.directory, exist_ok=True)
        checkpoint.write_atomically(self._file(k), checkpoint.encode(doc))

    def _prune(self) -> None:
        numbers = self.numbers()
        if self.max_to_keep is None or len(numbers) <= self.max_to_keep:
            return
        old = numbers[:-self.max_to_keep]
        last = None
        for k in old:
            try:
                doc = self.read(k)
            except (OSError, DataLossError):
                doc = None
            if self.keep_seconds is not None and doc is not None:
                last = doc["began"] if last is None else last
                if doc["time"] - last >= self.keep_seconds:
                    last = doc["time"]   # kept: keep_checkpoint_every_n_hours
                    continue
            try:
                os.unlink(self._file(k))
            except FileNotFoundError:
                pass

    def remove_all(self) -> None:
        for k in self.numbers():
            try:
                os.unlink(self._file(k))
            except FileNotFoundError:
                pass
        try:
            os.rmdir(self.directory)   # only when nothing else is there
        except OSError:
            pass

    # ------------------------------------------------------------------ run
    def run(self, writer, path: str) -> None:
        """Save ``writer`` (the dataset of a resumable ``Snapshot`` node writing
        ``path``), resuming from the newest checkpoint when there is one."""
        import time
        import warnings
        path_key = os.path.abspath(path)
        numbers = self.numbers()
        resume = self.read(numbers[-1]) if numbers else None
        if resume is not None:
            if resume["path"] != path_key:
                raise InvalidArgumentError(
                    f"save: the checkpoint {resume['file']} is of a save to "
                    f"{resume['path']!r}, not {path_key!r}: give this save another "
                    "checkpoint directory, or delete that one to start over", "save")
            meta = read_snapshot_metadata(path)
            if meta is not None and meta.get("run_id") == resume["run"]:
                self.remove_all()   # that save completed; only its checkpoints were left
                return
            if not os.path.isdir(run_tmp_dir(path, resume["run"])):
                warnings.warn(f"save: the partial run {resume['file']} continues is gone; "
                              f"the save of {path} starts over", RuntimeWarning, stacklevel=3)
                self.remove_all()
                resume = None
        _remove_saved(path)
        if resume is None:
            _remove_partial_runs(path)
        began = time.time() if resume is None else resume["began"]
        count = 0 if resume is None else int(resume["elements"])
        k = numbers[-1] if numbers and resume is not None else 0
        it = iter(writer)
        try:
            if resume is not None:
                it.restore(resume["state"])
            due = count + self.interval
            step = self.step_counter
            pending = None
            for _ in it:
                if pending is not None:
                    # written once the next row came: an op may have counted a row whose
                    # error it raises at the next pull (a generator's), which a resume
                    # from that state would skip
                    k += 1
                    self._write_checkpoint(path, path_key, k, *pending, began)
                    pending = None
                count += 1
                if step is not None:
                    step.assign_add(1)
                if count >= due and _between_chunks(it):
                    pending = (it.save(), count)
                    due = count + self.interval
        finally:
            raw = getattr(it, "_raw", None)
            if raw is not None:
                raw.close()
        self.remove_all()

    def _write_checkpoint(self, path: str, path_key: str, k: int, state: bytes, count: int,
                          began: float) -> None:
        import time
        from nbdata import checkpoint
        from nbdata.checkpoint import fsync_path
        found = _save_state_of(checkpoint.decode(state))
        if found is None:
            return   # the writer has ended: nothing left to resume
        tmp = run_tmp_dir(path, found["run"])
        for name in os.listdir(tmp):   # the bytes the state counts, on disk first
            fsync_path(os.path.join(tmp, name))
        fsync_path(tmp)
        self._write(k, {"format": "nbdata.save", "path": path_key, "run": found["run"],
                        "elements": count, "began": began, "time": time.time(),
                        "state": state})
        self._prune()


def _remove_saved(path: str) -> None:
    """Remove the complete save at ``path`` (its metadata first: it is then gone for
    ``load``), before a new save writes there."""
    old = read_snapshot_metadata(path)
    if old is not None:
        os.unlink(os.path.join(path, METADATA_NAME))
        shutil.rmtree(os.path.join(path, old["run_id"]), ignore_errors=True)


def _remove_partial_runs(path: str) -> None:
    """Remove the partial runs interrupted saves left in ``path``."""
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return
    for name in names:
        if name.startswith(".") and name.endswith(".tmp") and RUN_ID.fullmatch(name[1:-4]):
            shutil.rmtree(os.path.join(path, name), ignore_errors=True)


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
