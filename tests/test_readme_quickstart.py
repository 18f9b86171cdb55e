"""The README's quick start runs as written: its Python blocks, in order, in one namespace
(in a scratch directory, as they write files); a block that imports a package that is
not installed (torch, h5py, pyarrow) is skipped with the blocks after it that use its
names. Then what the blocks made is checked against NumPy."""

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = "## Quick start for NumPy and PyTorch users"


def quickstart_blocks() -> list[str]:
    text = README.read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return re.findall(r"^```python\n(.*?)^```$", text[start:end], re.M | re.S)


def _missing(block: str) -> list[str]:
    names = re.findall(r"^\s*import (\w+)", block, re.M)
    return [n for n in names if importlib.util.find_spec(n) is None]


def test_the_quick_start_is_near_the_top_after_the_set_up_commands():
    text = README.read_text()
    headings = re.findall(r"^## .*$", text, re.M)
    assert headings[:2] == ["## Set up and run", SECTION]
    setup = text[text.index("## Set up and run"):text.index(SECTION)]
    assert setup.count("```bash") == 2 and "pip install ." in setup
    assert "](#nbdata-with-a-pytorch-dataloader-and-beside-a-trainer)" in text
    assert "## nbdata with a PyTorch DataLoader and beside a trainer" in headings


def test_the_quick_start_runs_as_written(tmp_path, monkeypatch, capsys):
    blocks = quickstart_blocks()
    assert len(blocks) == 4
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "__quickstart__"}
    ran = []
    for block in blocks:
        if _missing(block):
            continue
        exec(compile(block, str(README), "exec"), ns)
        ran.append(block)
    assert ran[:2] == blocks[:2]   # NumPy and nbdata only: they always run
    X, y = ns["X"], ns["y"]
    assert capsys.readouterr().out.splitlines()[0] == "7 batches per epoch"

    # the first block: shuffled, normalized batches holding the first 7 * 256 shuffled rows
    pipe = ns["pipe"]
    batches = list(pipe)
    assert len(batches) == len(pipe) == 7
    xs = np.concatenate([b[0] for b in batches])
    labels = np.concatenate([b[1] for b in batches])
    assert xs.shape == (7 * 256, 32) and xs.dtype == np.float32 and labels.dtype == np.int64
    # each batch row is a distinct row of X normalized as NumPy does, with its own label
    normalized = (X - 0.5) * 2.0
    by_row = {normalized[i].tobytes(): i for i in range(len(X))}
    found = [by_row[x.tobytes()] for x in xs]
    assert [int(y[i]) for i in found] == labels.tolist()
    assert len(set(found)) == len(found) and found != sorted(found)   # shuffled
    # the full shuffle: every label once per epoch
    assert sorted(ns["labels"].tolist()) == sorted(y.tolist())

    if blocks[2] in ran:
        h5 = np.concatenate([b for _, b in ns["from_h5"]])
        assert sorted(h5.tolist()) == sorted(y.tolist())
        npy = np.concatenate(list(ns["from_npy"]))
        np.testing.assert_array_equal(npy, X)
        got = [(xb, lb) for xb, lb in ns["from_parquet"]]
        np.testing.assert_array_equal(np.concatenate([g[0] for g in got]), X)
        np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), y)
    if blocks[3] in ran:
        import torch
        x, xb, same = ns["x"], ns["xb"], ns["same"]
        assert isinstance(x, torch.Tensor) and x.shape == (256, 32)
        assert x.data_ptr() == xb.ctypes.data == same.data_ptr()   # no copy
