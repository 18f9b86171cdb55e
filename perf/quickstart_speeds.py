"""The speeds the README's quick start quotes: `python perf/quickstart_speeds.py [ROWS]`.

Rows of 32 float32 features and an int64 label (default 1,000,000 rows, 136 MB) from
NumPy in memory, a memory-mapped .npy file, HDF5 (h5py) and Parquet (pyarrow), each
through shuffle -> map -> batch(256), and the same batches handed to torch with
`torch.from_numpy`. Prints compile seconds and rows/s (best of three epochs after a
warm-up epoch) per row; a row whose package is missing says so. Files go to a
temporary directory.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

import nbdata as nd


def _epochs(pipe, consume=None, repeats: int = 3) -> float:
    best = float("inf")
    for k in range(repeats + 1):
        started = time.perf_counter()
        for xb, yb in pipe:
            if consume is not None:
                consume(xb, yb)
        if k:
            best = min(best, time.perf_counter() - started)
    return best


def main(rows: int) -> None:
    X = np.random.default_rng(0).random((rows, 32), dtype=np.float32)
    y = np.arange(rows) % 10
    work = tempfile.mkdtemp(prefix="nbdata-quickstart-")
    norm = lambda x, label: ((x - 0.5) * 2.0, label)   # noqa: E731

    def sources():
        yield "NumPy in memory, shuffle(16_384)", lambda: nd.Dataset.from_tensor_slices((X, y)).shuffle(16_384, seed=0)
        yield "NumPy in memory, global_shuffle", lambda: nd.experimental.global_shuffle(
            nd.Dataset.from_tensor_slices((X, y)), seed=0)
        np.save(os.path.join(work, "x.npy"), X)
        np.save(os.path.join(work, "y.npy"), y)
        yield "np.load(mmap_mode='r'), shuffle(16_384)", lambda: nd.Dataset.from_tensor_slices(
            (np.load(os.path.join(work, "x.npy"), mmap_mode="r"),
             np.load(os.path.join(work, "y.npy"), mmap_mode="r"))).shuffle(16_384, seed=0)
        try:
            import h5py
        except ImportError:
            yield "HDF5 (h5py not installed)", None
        else:
            with h5py.File(os.path.join(work, "d.h5"), "w") as f:
                f["x"], f["y"] = X, y
            h5 = h5py.File(os.path.join(work, "d.h5"), "r")
            yield "HDF5, shuffle(16_384)", lambda: nd.Dataset.from_tensor_slices(
                (h5["x"], h5["y"])).shuffle(16_384, seed=0)
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            yield "Parquet (pyarrow not installed)", None
        else:
            pq.write_table(pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), 32),
                                     "label": y}), os.path.join(work, "d.parquet"))
            yield "Parquet, shuffle(16_384)", lambda: nd.io.ParquetDataset(
                os.path.join(work, "d.parquet"), columns=["x", "label"]).map(
                lambda e: (e["x"], e["label"])).shuffle(16_384, seed=0)

    print(f"{rows:,} rows of 32 float32 + an int64 label; {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.1f}")
    print(f"{'source -> map -> batch(256)':44s} {'compile s':>9s} {'M rows/s':>9s}")
    for title, make in sources():
        if make is None:
            print(f"{title:44s} skipped")
            continue
        started = time.perf_counter()
        pipe = make().map(norm).batch(256).prefetch(2).compile()
        compiled = time.perf_counter() - started
        best = _epochs(pipe)
        print(f"{title:44s} {compiled:9.1f} {rows / best / 1e6:9.1f}")
        if title.startswith("NumPy in memory, shuffle"):
            try:
                import torch
            except ImportError:
                print(f"{'  + torch.from_numpy (torch not installed)':44s} skipped")
                continue
            best = _epochs(pipe, lambda xb, yb: (torch.from_numpy(xb), torch.from_numpy(yb)))
            print(f"{'  + torch.from_numpy of each batch':44s} {'':9s} {rows / best / 1e6:9.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
