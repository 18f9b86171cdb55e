"""w2: Examples {x: float[16], label: int64, id: bytes} in one TFRecord file, parsed and
batched by 256; `w2` reads the plain file, `w2_gzip` the GZIP-compressed one."""

from __future__ import annotations

import os
from typing import Optional

import numpy as np

from perf.files import cached_file
from perf.measure import Implementation, Workload, nbdata_rows

BATCH = 256
FULL_ROWS = 200_000
QUICK_ROWS = 20_000


def values(n: int):
    """What record i holds: x = a seeded float32 row, label = i, id = b"id-%07d" % i."""
    x = np.random.default_rng(2).random((n, 16), dtype=np.float32)
    return x, np.arange(n, dtype=np.int64), [b"id-%07d" % i for i in range(n)]


def data_file(n: int, compression: str) -> str:
    """The TFRecord file of n Examples (written by nbdata's writer, which TF reads)."""
    def write(path):
        from nbdata.io import TFRecordWriter, encode_example
        x, label, ids = values(n)
        with TFRecordWriter(path, compression) as writer:
            for i in range(n):
                writer.write(encode_example({"x": x[i], "label": label[i], "id": ids[i]}))
    suffix = {"": "tfrecord", "GZIP": "tfrecord.gz"}[compression]
    return cached_file(f"w2-{n}.{suffix}", write)


def features(nd):
    return {"x": nd.io.FixedLenFeature([16], np.float32),
            "label": nd.io.FixedLenFeature([], np.int64),
            "id": nd.io.FixedLenFeature([], nd.string)}


def tf_features(tf):
    return {"x": tf.io.FixedLenFeature([16], tf.float32),
            "label": tf.io.FixedLenFeature([], tf.int64),
            "id": tf.io.FixedLenFeature([], tf.string)}


def nbdata_dataset(nd, path: str, compression: str):
    """The pipeline as a tf.data user writes it: parse each record, then batch
    (nbdata's rewrite turns it into batch -> parse_example on record columns)."""
    spec = features(nd)
    return (nd.TFRecordDataset(path, compression_type=compression)
            .map(lambda r: nd.io.parse_single_example(r, spec))
            .batch(BATCH))


def build_for(compression: str, quick: bool) -> Workload:
    n_rows = QUICK_ROWS if quick else FULL_ROWS

    def head(n):
        return data_file(n, compression), compression

    nbdata_fused, nbdata_reference = nbdata_rows(nbdata_dataset, head)

    def tf_per_record(n):
        import tensorflow as tf
        spec = tf_features(tf)
        ds = (tf.data.TFRecordDataset(data_file(n, compression), compression_type=compression)
              .map(lambda r: tf.io.parse_single_example(r, spec)).batch(BATCH))
        return ds.as_numpy_iterator

    def tf_best(n):
        import tensorflow as tf
        spec = tf_features(tf)
        ds = (tf.data.TFRecordDataset(data_file(n, compression), compression_type=compression)
              .batch(BATCH)
              .map(lambda r: tf.io.parse_example(r, spec), num_parallel_calls=tf.data.AUTOTUNE)
              .prefetch(tf.data.AUTOTUNE))
        return ds.as_numpy_iterator

    def inflate_only(n):
        """The bound of the GZIP rows: only inflating the same file, with the module
        nbdata inflates with (isal's when installed, else zlib), 1 MiB at a time."""
        from nbdata.kernels.files import _inflate_module
        path, module = data_file(n, compression), _inflate_module()

        def epoch():
            inflater = module.decompressobj(31)   # a GZIP member
            with open(path, "rb") as f:
                while block := f.read(1 << 20):
                    yield inflater.decompress(block)
            yield inflater.flush()
        return epoch

    slow = 4_000 if quick else 20_000
    bound = [Implementation("inflate only (the same file, nbdata's inflater) [bound]", "kernel",
                            inflate_only)] if compression else []
    impls = bound + [
        Implementation("nbdata map(parse_single_example).batch (ds.compile())", "nbdata",
                       nbdata_fused, "nbdata"),
        Implementation("nbdata reference (fusion=False)", "nbdata", nbdata_reference, "nbdata",
                       prefix=slow),
        Implementation("tf.data map(parse_single_example).batch", "tf.data", tf_per_record,
                       "tensorflow"),
        Implementation("tf.data batch.map(parse_example, AUTOTUNE).prefetch [best]", "tf.data",
                       tf_best, "tensorflow"),
    ]
    name = "GZIP " if compression else ""
    return Workload(f"w2{'_gzip' if compression else ''}: {n_rows:,} Examples "
                    f"{{x: float[16], label: int64, id: bytes}} in one {name}TFRecord file "
                    f"-> parse -> batch({BATCH})",
                    "records", n_rows, impls, check,
                    baseline_group="kernel" if compression else "tf.data",
                    baseline_label="vs inflate only" if compression else "vs tf.data per-record",
                    notes="[best] tf.data's recommended form: vectorized parse_example after "
                          "batch, parallel calls and prefetch autotuned."
                          + (" [bound] only inflating the file: the rate parsing could reach "
                             "if it hid entirely behind inflation (the kernel column's ratio)."
                             if compression else ""))


def build(quick: bool) -> Workload:
    return build_for("", quick)


def build_gzip(quick: bool) -> Workload:
    return build_for("GZIP", quick)


def check(batches: list, n: int, full_batches: bool) -> Optional[str]:
    """Every record once, in file order, with exactly the values written (the inflate
    bound: all the bytes of the uncompressed file)."""
    if not batches:
        return "no batches"
    if isinstance(batches[0], bytes):
        got, want = sum(map(len, batches)), os.path.getsize(data_file(n, ""))
        return None if got == want else f"inflated {got} bytes, the file has {want}"
    if any(set(b) != {"x", "label", "id"} for b in batches):
        return f"features {sorted(batches[0])}, want id, label, x"
    x = np.concatenate([np.asarray(b["x"]) for b in batches])
    label = np.concatenate([np.asarray(b["label"]) for b in batches])
    ids = [bytes(v) for b in batches for v in np.asarray(b["id"]).tolist()]
    want_x, want_label, want_ids = values(n)
    if x.dtype != np.float32 or label.dtype != np.int64:
        return f"dtypes x {x.dtype}, label {label.dtype}; want float32, int64"
    if not (np.array_equal(x, want_x) and np.array_equal(label, want_label)):
        return "x or label differ from the values written"
    if ids != want_ids:
        return "ids differ from the values written"
    if any(len(b["label"]) != BATCH for b in batches[:-1]):
        return f"a batch other than the last is not {BATCH} long"
    return None
