"""pack: token sequences (lengths uniform in 10..2,000) in a Parquet ``list<int32>``
column -> packed into rows of 2,048 (segment ids, positions) -> batch(8); against a
hand-written Numba kernel over pyarrow's record batches, a NumPy loop, and Grain's
``FirstFitPackIterDataset`` (optional peer).

Every row packs the same way: the greedy sequential packer (first-fit over one open
row, ``nd.experimental.pack(2048)``; Grain with ``num_packing_bins=1`` and
``shuffle_bins=False``), so the batches are equal and checked to be.

Sizes: 100,000 sequences (about 100 M tokens, 400 MB of int32) by default; 10,000
with ``--quick``; the issue's 1,000,000 with ``NBDATA_PERF_PACK_FULL=1`` (about 4 GB of
tokens; the harness keeps one epoch's batches for its check, about 16 GB more).
"""

from __future__ import annotations

import functools
import os
from typing import Optional

import numpy as np

from perf.files import cached_file
from perf.measure import Implementation, Workload, nbdata_options

SEQ_LEN = 2048
BATCH = 8
LOW, HIGH = 10, 2000
DEFAULT_ROWS = 100_000
QUICK_ROWS = 10_000
FULL_ROWS = 1_000_000
VOCAB = 32_000


def sequences(n: int):
    """(offsets int64 (n + 1,), values int32): the file's token lists."""
    rng = np.random.default_rng(7)
    lengths = rng.integers(LOW, HIGH + 1, n)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.integers(1, VOCAB, int(offsets[-1]), dtype=np.int32)
    return offsets, values


def data_file(n: int) -> str:
    def write(path):
        import pyarrow as pa
        import pyarrow.parquet as pq
        offsets, values = sequences(n)
        tokens = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
        tokens = tokens.cast(pa.list_(pa.int32()))
        # A label column with nulls, which the pipelines do not read.
        label = pa.array(np.arange(n), mask=np.arange(n) % 10 == 0)
        pq.write_table(pa.table({"tokens": tokens, "label": label}), path,
                       row_group_size=8192)
    return cached_file(f"pack-{n}.parquet", write)


# ------------------------------------------------------------- hand kernel

def _kernel():
    import numba

    @numba.njit(nogil=True, cache=True)
    def pack_rows(values, offsets, seq_len, carry, carry_fill):
        """Greedy sequential packing of one record batch: rows (tokens, segment ids,
        positions), the open row carried in ``carry`` (3, seq_len) with ``carry_fill``
        (used, segments), both updated."""
        n = len(offsets) - 1
        rows, used = 1, carry_fill[0]          # first pass: the rows it makes
        for i in range(n):
            length = min(offsets[i + 1] - offsets[i], seq_len)
            if length and used + length > seq_len and used > 0:
                rows += 1
                used = 0
            used += length
        out = np.zeros((3, rows, seq_len), np.int32)
        out[:, 0] = carry
        row, used, segs = 0, carry_fill[0], carry_fill[1]
        for i in range(n):
            a = offsets[i]
            length = min(offsets[i + 1] - a, seq_len)
            if length == 0:
                continue
            if used + length > seq_len and used > 0:
                row += 1
                used, segs = 0, 0
            segs += 1
            for q in range(length):
                out[0, row, used + q] = values[a + q]
                out[1, row, used + q] = segs
                out[2, row, used + q] = q
            used += length
        carry[:] = out[:, row]
        carry_fill[0], carry_fill[1] = used, segs
        return out[:, :row]
    return pack_rows


def hand_kernel_rows(path: str):
    """Packed rows (tokens, segment ids, positions), record batch by record batch."""
    import pyarrow.parquet as pq
    pack_rows = _kernel()
    carry = np.zeros((3, SEQ_LEN), np.int32)
    fill = np.zeros(2, np.int64)
    for batch in pq.ParquetFile(path).iter_batches(columns=["tokens"], batch_size=1 << 16):
        col = batch.column(0)
        offsets = col.offsets.to_numpy().astype(np.int64)
        values = col.values.to_numpy()
        yield pack_rows(values, offsets, SEQ_LEN, carry, fill)
    if fill[0]:
        yield carry[:, None].copy()


def batches_of(row_blocks):
    """batch(BATCH) over blocks of packed rows (3, rows, SEQ_LEN)."""
    held = None
    for block in row_blocks:
        if held is not None and held.shape[1]:      # join only the batch that straddles
            need = BATCH - held.shape[1]
            head = np.concatenate([held, block[:, :need]], axis=1)
            block = block[:, need:]
            if head.shape[1] < BATCH:
                held = head
                continue
            yield tuple(head)
        full = block.shape[1] // BATCH * BATCH
        for s in range(0, full, BATCH):
            yield tuple(block[:, s:s + BATCH])
        held = block[:, full:]
    if held is not None and held.shape[1]:
        yield tuple(held)


# ------------------------------------------------------------------ check

def _as_parts(batch):
    if isinstance(batch, dict):
        return batch["tokens"], batch["tokens_segment_ids"], batch["tokens_positions"]
    return batch


def _checker(n_rows_path):
    @functools.cache
    def expected(n):
        rows = np.concatenate(list(hand_kernel_rows(n_rows_path(n))), axis=1)
        return rows

    def check(batches: list, n: int, full_batches: bool) -> Optional[str]:
        if not batches:
            return "no batches"
        parts = [_as_parts(b) for b in batches]
        if any(len(p[0]) > BATCH for p in parts):
            return f"a batch larger than {BATCH}"
        if full_batches and any(len(p[0]) != BATCH for p in parts[:-1]):
            return "a batch before the last is not full"
        want = expected(n)
        for k, what in enumerate(["tokens", "segment ids", "positions"]):
            got = np.concatenate([np.asarray(p[k]) for p in parts])
            if got.shape != want[k].shape:
                return f"{what}: shape {got.shape}, expected {want[k].shape}"
            if not np.array_equal(got, want[k]):
                return f"{what} differ from the hand kernel's"
        return None
    return check


# ---------------------------------------------------------------- workload

def build(quick: bool) -> Workload:
    full = os.environ.get("NBDATA_PERF_PACK_FULL", "") not in ("", "0")
    n_rows = QUICK_ROWS if quick else FULL_ROWS if full else DEFAULT_ROWS

    @functools.cache
    def path(n):
        return data_file(n)

    def nbdata_row(reads):
        def prepare(n):
            import nbdata as nd
            ds = (nd.io.ParquetDataset(path(n), num_parallel_reads=reads)
                  .map(lambda d: d["tokens"])
                  .apply(nd.experimental.pack(SEQ_LEN)).batch(BATCH)
                  .with_options(nbdata_options(nd)))
            pipe = ds.compile()
            return lambda: pipe
        return prepare

    def kernel_row(n):
        _kernel()(np.zeros(1, np.int32), np.zeros(2, np.int64), SEQ_LEN,
                  np.zeros((3, SEQ_LEN), np.int32), np.zeros(2, np.int64))   # compile
        return lambda: batches_of(hand_kernel_rows(path(n)))

    def numpy_row(n):
        import pyarrow.parquet as pq

        def epoch():
            def rows():
                tokens = np.zeros(SEQ_LEN, np.int32)
                seg = np.zeros(SEQ_LEN, np.int32)
                pos = np.zeros(SEQ_LEN, np.int32)
                used = segs = 0
                ramp = np.arange(SEQ_LEN, dtype=np.int32)
                out = []
                file = pq.ParquetFile(path(n))
                for batch in file.iter_batches(columns=["tokens"], batch_size=1 << 16):
                    col = batch.column(0)
                    offsets = col.offsets.to_numpy()
                    values = col.values.to_numpy()
                    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
                        length = min(b - a, SEQ_LEN)
                        if used + length > SEQ_LEN and used:
                            out.append((tokens, seg, pos))
                            tokens = np.zeros(SEQ_LEN, np.int32)
                            seg = np.zeros(SEQ_LEN, np.int32)
                            pos = np.zeros(SEQ_LEN, np.int32)
                            used = segs = 0
                        segs += 1
                        tokens[used:used + length] = values[a:a + length]
                        seg[used:used + length] = segs
                        pos[used:used + length] = ramp[:length]
                        used += length
                        if len(out) >= BATCH:
                            yield np.stack([r for r in out]).transpose(1, 0, 2)
                            out = []
                if used:
                    out.append((tokens, seg, pos))
                if out:
                    yield np.stack(out).transpose(1, 0, 2)
            return batches_of(rows())
        return epoch

    def grain_row(n):
        import grain.python as gp
        import pyarrow.parquet as pq
        col = pq.read_table(path(n), columns=["tokens"]).column(0).combine_chunks()
        offsets = col.offsets.to_numpy()
        values = col.values.to_numpy()
        source = [{"tokens": values[a:b]} for a, b in zip(offsets[:-1], offsets[1:])]

        def epoch():
            ds = gp.MapDataset.source(source).to_iter_dataset()
            ds = gp.experimental.FirstFitPackIterDataset(
                ds, length_struct={"tokens": SEQ_LEN}, num_packing_bins=1, shuffle_bins=False)
            return iter(ds.batch(BATCH))
        return epoch

    impls = [
        Implementation("nbdata ParquetDataset.map.pack(2048).batch(8) (ds.compile())", "nbdata",
                       nbdata_row(None), "nbdata"),
        Implementation("nbdata ... num_parallel_reads=AUTOTUNE", "nbdata", nbdata_row(-1),
                       "nbdata"),
        Implementation("hand Numba kernel over pyarrow record batches", "kernel", kernel_row,
                       "numba"),
        Implementation("NumPy loop over pyarrow record batches", "numpy", numpy_row, "pyarrow",
                       prefix=None if quick else 30_000),
        Implementation("Grain FirstFitPackIterDataset(num_packing_bins=1).batch(8) [a]", "grain",
                       grain_row, "grain", prefix=None if quick else 20_000),
    ]
    notes = ("[a] the sequences loaded from the file into a list of NumPy arrays first "
             "(untimed): Grain packs in Python, element by element.\n"
             "Every row packs greedily into one open row (first-fit over 1 bin); batches "
             "checked equal to the hand kernel's.")
    return Workload(f"pack: {n_rows:,} token sequences (lengths {LOW}-{HIGH:,}) from Parquet -> "
                    f"pack({SEQ_LEN}) -> batch({BATCH})", "sequences", n_rows, impls,
                    _checker(path), notes)
