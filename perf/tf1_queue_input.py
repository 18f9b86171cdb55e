"""tf1_csv / tf1_tfrecord: the TF1 "Reading data" queue pipeline (string_input_producer ->
reader -> decode -> shuffle_batch, fed by QueueRunner threads) in nbdata, TF1 and tf.data."""

from __future__ import annotations

import atexit
import itertools
import os
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable, Optional

import numpy as np

from perf.environment import missing
from perf.files import cached_file
from perf.measure import Implementation, Workload

BATCH = 256
MIN_AFTER_DEQUEUE = 10_000
CAPACITY = MIN_AFTER_DEQUEUE + 3 * BATCH
READ_UP_TO = 1000
FILES = 4
FULL_ROWS_PER_FILE = 200_000
QUICK_ROWS_PER_FILE = 20_000


def values(per_file: int):
    """Row i of the data set, line i % per_file of file i // per_file: four floats with up
    to 6 decimals (the CSV text; float32 in the TFRecords) and the label i."""
    floats = np.round(np.random.default_rng(7).normal(0, 100, (FILES * per_file, 4)), 6)
    return floats, np.arange(FILES * per_file, dtype=np.int64)


def csv_files(per_file: int) -> list:
    """FILES CSV files of per_file lines `f0,f1,f2,f3,label` (floats as Python's repr)."""
    floats, labels = values(per_file)

    def writer(f):
        def write(path):
            rows = slice(f * per_file, (f + 1) * per_file)
            lines = zip(*(floats[rows, j].tolist() for j in range(4)), labels[rows].tolist())
            with open(path, "w") as out:
                out.write("".join("%r,%r,%r,%r,%d\n" % line for line in lines))
        return write
    return [cached_file(f"tf1-{per_file}-{f}.csv", writer(f)) for f in range(FILES)]


def tfrecord_files(per_file: int) -> list:
    """FILES TFRecord files of per_file Examples {x: float[4], label: int64}."""
    floats, labels = values(per_file)
    x = floats.astype(np.float32)

    def writer(f):
        def write(path):
            rows = slice(f * per_file, (f + 1) * per_file)
            if missing("tensorflow"):
                from nbdata.io import TFRecordWriter, encode_example
                with TFRecordWriter(path) as out:
                    for xi, label in zip(x[rows], labels[rows]):
                        out.write(encode_example({"x": xi, "label": label}))
                return
            import tensorflow as tf
            with tf.io.TFRecordWriter(path) as out:
                for xi, label in zip(x[rows].tolist(), labels[rows].tolist()):
                    feature = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=xi)),
                               "label": tf.train.Feature(
                                   int64_list=tf.train.Int64List(value=[label]))}
                    out.write(tf.train.Example(features=tf.train.Features(feature=feature))
                              .SerializeToString())
        return write
    return [cached_file(f"tf1-{per_file}-{f}.tfrecord", writer(f)) for f in range(FILES)]


def decode_csv(lib, value):
    """(features [.., 4] float32, label int32) of CSV lines: the guide's decode_csv and stack."""
    columns = lib.api.io.decode_csv(value, record_defaults=lib.csv_defaults)
    return lib.stack(columns[:4], axis=-1), columns[4]


def parse_example(lib, value, batched: bool):
    """(x float32 [.., 4], label int64) of serialized Examples; parse_example on a vector."""
    spec = {"x": lib.api.io.FixedLenFeature([4], lib.float32),
            "label": lib.api.io.FixedLenFeature([], lib.int64)}
    parse = lib.api.io.parse_example if batched else lib.api.io.parse_single_example
    example = parse(value, spec)
    return example["x"], example["label"]


@dataclass(frozen=True)
class Format:
    """One file format: its files, TF1 reader class, tf.data dataset and decode step."""

    name: str
    records: str                   # what a row is, for the title
    files: Callable[[int], list]
    reader: str                    # the class name in tf.compat.v1 and nbdata
    dataset: str                   # the tf.data class over one file
    decode: Callable               # decode(lib, value, batched) -> (features, label)
    decode_names: tuple            # (per record, on a vector), for the row names
    label_dtype: type


CSV = Format("csv", "CSV lines (4 floats, 1 int)", csv_files, "TextLineReader",
             "TextLineDataset", lambda lib, value, batched: decode_csv(lib, value),
             ("decode_csv", "decode_csv"), np.int32)
TFRECORD = Format("tfrecord", "Examples {x: float[4], label: int64}", tfrecord_files,
                  "TFRecordReader", "TFRecordDataset", parse_example,
                  ("parse_single_example", "parse_example"), np.int64)


def nbdata_lib():
    import nbdata as nd
    # TF's dtypes for [[0.0]] and [[0]] (nbdata follows NumPy: float64 and int64).
    return SimpleNamespace(api=nd, stack=np.stack, float32=np.float32, int64=np.int64,
                           csv_defaults=[[np.float32(0)]] * 4 + [[np.int32(0)]])


def tf1_lib():
    import tensorflow as tf
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)  # the queue API's deprecations
    tf.compat.v1.disable_eager_execution()
    return SimpleNamespace(api=tf.compat.v1, stack=tf.stack, float32=tf.float32,
                           int64=tf.int64, csv_defaults=[[0.0]] * 4 + [[0]])


def queue_pipeline(lib, files: list, fmt: Format, batched: bool):
    """The guide's graph in `lib.api` (tf.compat.v1 or nbdata): (features_batch, label_batch).

    Per record: reader.read -> decode -> shuffle_batch. Batched: reader.read_up_to(1000)
    -> the same decode on the vector -> shuffle_batch(enqueue_many=True)."""
    filename_queue = lib.api.train.string_input_producer(files)
    reader = getattr(lib.api, fmt.reader)()
    if batched:
        _, value = reader.read_up_to(filename_queue, READ_UP_TO)
    else:
        _, value = reader.read(filename_queue)
    features, label = fmt.decode(lib, value, batched)
    return lib.api.train.shuffle_batch([features, label], batch_size=BATCH, capacity=CAPACITY,
                                       min_after_dequeue=MIN_AFTER_DEQUEUE,
                                       enqueue_many=batched)


def epoch_batches(n: int) -> int:
    """Batches in one timed pass of at least n rows."""
    return -(-n // BATCH)


def stop_at_exit(coord, threads, sess) -> None:
    """At interpreter exit: request_stop, join the runner threads, close the session.

    A failure there exits with status 1, so the row reports it instead of its result."""
    def stop():
        try:
            coord.request_stop()
            coord.join(threads, stop_grace_period_secs=30)
            sess.close()
        except Exception as exc:
            print(f"shutdown: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            os._exit(1)
    atexit.register(stop)


def build_for(fmt: Format, quick: bool) -> Workload:
    per_file = QUICK_ROWS_PER_FILE if quick else FULL_ROWS_PER_FILE
    n_rows = FILES * per_file

    def queue_rows(make_lib, batched: bool):
        def prepare(n):
            lib = make_lib()
            fetches = queue_pipeline(lib, fmt.files(per_file), fmt, batched)
            sess = lib.api.Session()
            sess.run(lib.api.local_variables_initializer())
            coord = lib.api.train.Coordinator()
            threads = lib.api.train.start_queue_runners(sess=sess, coord=coord)
            stop_at_exit(coord, threads, sess)

            def epoch():
                for _ in range(epoch_batches(n)):
                    yield sess.run(fetches)
            return epoch
        return prepare

    def tf_data(n):
        import tensorflow as tf
        lib = SimpleNamespace(api=tf, stack=tf.stack, float32=tf.float32, int64=tf.int64,
                              csv_defaults=[[0.0]] * 4 + [[0]])
        ds = (tf.data.Dataset.from_tensor_slices(fmt.files(per_file))
              .interleave(getattr(tf.data, fmt.dataset), cycle_length=FILES,
                          num_parallel_calls=tf.data.AUTOTUNE)
              .repeat().shuffle(MIN_AFTER_DEQUEUE).batch(BATCH)
              .map(lambda value: fmt.decode(lib, value, True), num_parallel_calls=tf.data.AUTOTUNE)
              .prefetch(tf.data.AUTOTUNE))
        batches = ds.as_numpy_iterator()
        return lambda: itertools.islice(batches, epoch_batches(n))

    decode, decode_many = fmt.decode_names
    slow = 20_000 if quick else 100_000
    impls = [
        Implementation(f"nbdata {fmt.reader}.read -> {decode} -> shuffle_batch", "nbdata",
                       queue_rows(nbdata_lib, False), "nbdata"),
        Implementation(f"nbdata read_up_to({READ_UP_TO}) -> {decode_many} -> "
                       "shuffle_batch(enqueue_many)", "nbdata", queue_rows(nbdata_lib, True),
                       "nbdata"),
        Implementation(f"TF1 {fmt.reader}.read -> {decode} -> shuffle_batch", "tf1",
                       queue_rows(tf1_lib, False), "tensorflow", prefix=slow),
        Implementation(f"TF1 read_up_to({READ_UP_TO}) -> {decode_many} -> "
                       "shuffle_batch(enqueue_many)", "tf1", queue_rows(tf1_lib, True),
                       "tensorflow"),
        Implementation(f"tf.data interleave({fmt.dataset}).shuffle.batch.map({decode_many}, "
                       "AUTOTUNE) [ref]", "tf.data", tf_data, "tensorflow"),
    ]
    name = f"tf1_{fmt.name}"
    return Workload(f"{name}: {FILES} files x {per_file:,} {fmt.records} -> string_input_producer "
                    f"-> {fmt.reader} -> shuffle_batch({BATCH}, min_after_dequeue="
                    f"{MIN_AFTER_DEQUEUE:,}), one pass of {n_rows:,} rows",
                    "rows", n_rows, impls, checker(per_file, fmt.label_dtype),
                    baseline_group="tf1", baseline_label="vs TF1 per-record",
                    compare_to=(name, 3, "vs TF1 read_up_to"),
                    notes="Queue rows: one reader thread (shuffle_batch's default), "
                          "sess.run([features_batch, label_batch]) in the main thread; a "
                          "prefix row times fewer rows per pass from the same files. "
                          "[ref] the same input as tf.data, for reference.")


def build_csv(quick: bool) -> Workload:
    return build_for(CSV, quick)


def build_tfrecord(quick: bool) -> Workload:
    return build_for(TFRECORD, quick)


def checker(per_file: int, label_dtype: type):
    """A Workload.check: full (features, label) batches, each row's features as written for
    its label, and the first batch not in file order."""
    def check(batches: list, n: int, full_batches: bool) -> Optional[str]:
        if len(batches) != epoch_batches(n):
            return f"{len(batches)} batches, want {epoch_batches(n)}"
        features = [np.asarray(b[0]) for b in batches]
        labels = [np.asarray(b[1]) for b in batches]
        if any(f.shape != (BATCH, 4) or f.dtype != np.float32 for f in features):
            return f"features {features[0].dtype}{features[0].shape}, want float32({BATCH}, 4)"
        if any(lb.shape != (BATCH,) or lb.dtype != label_dtype for lb in labels):
            return (f"labels {labels[0].dtype}{labels[0].shape}, "
                    f"want {label_dtype.__name__}({BATCH},)")
        want = values(per_file)[0].astype(np.float32)
        label = np.concatenate(labels)
        if label.min() < 0 or label.max() >= len(want):
            return "a label outside the data set"
        if not np.array_equal(np.concatenate(features), want[label]):
            return "features differ from the values written for their label"
        if np.all(np.diff(labels[0]) == 1):
            return "the first batch is in file order: not shuffled"
        return None
    return check
