"""What a new user meets in the first hour (issue 34): ``len(pipe)``, Dataset methods on
a compiled pipeline, ``python -m nbdata profile``'s options after the script, the
wording of ``stats()``, the error of a map returning lists of varying length, compile
feedback and the epoch progress bar."""

import json
import logging
import sys
import time

import numpy as np
import pytest

import nbdata as nd
from nbdata import __main__ as cli
from nbdata import profiler
from nbdata.errors import InvalidArgumentError


# ------------------------------------------------------------------ len(pipe)
def test_len_of_a_pipeline_is_its_cardinality_and_tqdm_style_consumers_get_it():
    pipe = nd.Dataset.range(10).map(lambda x: x * 2).batch(4).compile()
    assert len(pipe) == 3 == pipe.cardinality()
    assert len(pipe) == sum(1 for _ in pipe)
    # what tqdm does to find a total: len() inside try, TypeError meaning none
    assert len(nd.Dataset.range(7).compile()) == 7
    with pytest.raises(TypeError, match="infinite"):
        len(nd.Dataset.range(3).repeat().compile())
    with pytest.raises(TypeError, match="unknown"):
        len(nd.Dataset.range(3).filter(lambda x: x > 1).compile())
    with pytest.raises(TypeError, match="infinite"):
        len(nd.Dataset.range(3).repeat())


# ------------------------------------------------------------------ pipe.take(...)
def test_dataset_methods_on_a_pipeline_apply_to_its_dataset_and_compile():
    ds = nd.Dataset.range(20).map(lambda x: x * 3)
    pipe = ds.compile()
    taken = pipe.take(4)
    assert isinstance(taken, type(pipe))
    assert [int(x) for x in taken] == [0, 3, 6, 9]
    assert [b.tolist() for b in pipe.skip(15).batch(2)] == [[45, 48], [51, 54], [57]]
    assert [int(x) for x in pipe.filter(lambda x: x % 2 == 1).take(2)] == [3, 9]
    assert sorted(int(x) for x in pipe.shuffle(20, seed=1)) == list(range(0, 60, 3))
    assert len(pipe.repeat(2).prefetch(1)) == 40
    # the pipeline itself is unchanged
    assert [int(x) for x in pipe] == list(range(0, 60, 3))
    assert [int(x) for x in pipe.as_numpy_iterator()] == list(range(0, 60, 3))


def test_other_dataset_methods_on_a_pipeline_say_to_apply_them_before_compile():
    pipe = nd.Dataset.range(3).compile()
    with pytest.raises(AttributeError, match=r"'reduce'.*apply Dataset methods.*before compile\(\)"):
        pipe.reduce(0, lambda s, x: s + x)
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        pipe.no_such_thing
    assert not hasattr(pipe, "__array__")   # protocols probed by NumPy, pickle: plain misses
    # a pipeline made without a dataset (the executor's own) says the same
    bare = type(pipe)(pipe.logical, pipe.options)
    with pytest.raises(AttributeError, match=r"apply take\(\.\.\.\) to the dataset before compile"):
        bare.take(1)


# ------------------------------------------------------------------ profile CLI
@pytest.mark.parametrize("argv, output, rest", [
    (["3", "-o", "t.json"], "t.json", ["3"]),
    (["--output=t.json", "a"], "t.json", ["a"]),
    (["--output", "t.json", "--", "-o", "mine"], "t.json", ["-o", "mine"]),
    (["-x", "--", "--output", "x"], None, ["-x", "--output", "x"]),
    (["-only", "1"], None, ["-only", "1"]),
])
def test_profile_options_after_the_script_name(argv, output, rest):
    assert cli.script_options(argv, None) == (output, rest)


def test_python_m_nbdata_profile_takes_o_after_the_script(tmp_path, monkeypatch, capsys):
    script = tmp_path / "train.py"
    seen = tmp_path / "argv.json"
    script.write_text("import json, sys\nimport nbdata as nd\n"
                      "list(nd.Dataset.range(30).batch(10).prefetch(1))\n"
                      f"json.dump(sys.argv[1:], open({str(seen)!r}, 'w'))\n")
    out = tmp_path / "out.json"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        cli.main(["profile", str(script), "-o", str(out), "--epochs", "2", "--", "-o", "x"])
    assert done.value.code == 0
    assert json.loads(seen.read_text()) == ["--epochs", "2", "-o", "x"]
    assert json.loads(out.read_text())["traceEvents"]
    assert not (tmp_path / "train.trace.json").exists()
    assert f"trace written to {out}" in capsys.readouterr().err
    assert profiler.current() is None
    with pytest.raises(SystemExit):
        cli.main(["profile", "--help"])
    assert "script.py [-o TRACE]" in capsys.readouterr().out


# ------------------------------------------------------------------ stats() wording
def test_stats_count_batches_as_batches_and_name_each_budget():
    o = nd.Options()
    o.autotune.ram_budget = 1   # every prefetch buffer is held at its cap
    pipe = (nd.Dataset.range(100).map(lambda x: x + 1).batch(10)
            .prefetch(nd.AUTOTUNE).unbatch().with_options(o).compile())
    assert sum(1 for _ in pipe) == 100
    stats = pipe.stats()
    lines = {s.title.split("(")[0]: s.line() for s in stats.stages}
    assert lines["unbatch"].startswith("unbatch(): 100 elements in ")
    assert " elements/s" in lines["unbatch"]
    assert "prefetch" in lines and ": 10 batches in " in lines["prefetch"]
    assert " batches/s" in lines["prefetch"]
    assert ": 10 batches in " in lines["batch"]
    assert ": 100 elements in " in lines["map"]
    text = repr(stats)
    assert " rows/s" not in text and "RAM budget" not in text
    assert "cap of one autotuned prefetch buffer, Options().autotune.ram_budget" in text
    assert "of its memory budget, Options().memory_budget:" in text


def test_a_fused_stage_ending_in_batch_counts_batches_and_its_kernel_input_rows():
    o = nd.Options()
    o.fusion_min_rows = 0
    pipe = nd.Dataset.range(100).map(lambda x: x * 2).batch(10).with_options(o).compile()
    assert sum(1 for _ in pipe) == 10
    (stage,) = [s for s in pipe.stats().stages if s.node.op == "fused_stage"]
    assert stage.unit == "batches" and stage.rows == 10 and stage.kernel_rows == 100
    assert ": 10 batches in " in stage.line()
    assert "; kernel: 100 input rows in " in stage.line()


# ------------------------------------------------------------------ list returns
def test_a_map_returning_lists_of_varying_length_names_the_element_and_the_fix():
    ds = nd.Dataset.range(20).map(lambda x: [x, x] if x % 7 == 3 else [x])
    it = iter(ds)
    assert [tuple(map(int, next(it))) for _ in range(3)] == [(0,), (1,), (2,)]
    with pytest.raises(InvalidArgumentError) as e:
        next(it)
    text = str(e.value)
    assert "returned structure (., .) for element 3 of its input" in text
    assert "it returned (.,) when traced" in text
    assert "np.array(...)" in text and "padded_batch" in text
    # the run goes on after the element (as after any element's error); the next
    # bad one is named too
    assert [tuple(map(int, next(it))) for _ in range(6)] == [(i,) for i in range(4, 10)]
    with pytest.raises(InvalidArgumentError, match="for element 10 of its input"):
        next(it)
    # the fix the message gives works
    assert "output_signature=nd.TensorSpec((None,), dtype)" in text
    fixed = nd.Dataset.range(20).map(lambda x: np.array([x, x] if x % 7 == 3 else [x]),
                                     output_signature=nd.TensorSpec((None,), np.int64))
    assert [b.tolist() for b in fixed.take(5).padded_batch(5)] == [
        [[0, 0], [1, 0], [2, 0], [3, 3], [4, 0]]]


def test_other_structure_mismatches_get_no_list_hint():
    ds = nd.Dataset.range(4).map(lambda x: {"a": x} if x < 2 else (x, x))
    with pytest.raises(InvalidArgumentError) as e:
        list(ds)
    assert "for element 2 of its input" in str(e.value)
    assert "np.array" not in str(e.value)


# ------------------------------------------------------------------ compile feedback
def test_slow_work_says_what_it_does_once_it_takes_long_then_each_step_and_the_end(
        caplog, monkeypatch):
    from nbdata import progress
    caplog.set_level(logging.INFO, logger="nbdata")
    with progress.working("compiling a thing", after=0.05) as work:
        progress.step("step one")
        time.sleep(0.3)
        progress.step("step two")
        with progress.working("nested part"):   # inside slow work: a step of it
            pass
    said = [r.getMessage() for r in caplog.records if r.name == "nbdata"]
    assert said[0].startswith("compiling a thing: step one (") and "s so far)" in said[0]
    assert said[1:] == ["compiling a thing: step two", "compiling a thing: nested part",
                        said[-1]]
    assert said[-1].startswith("compiling a thing: done after ")
    assert isinstance(work, progress.SlowWork)
    caplog.clear()
    with progress.working("quick work"):
        progress.step("a step")
    assert not caplog.records   # quick work says nothing


def test_compiling_a_pipeline_names_its_steps_and_kernels(caplog, capsys, monkeypatch):
    from nbdata import progress
    monkeypatch.setattr(progress, "SLOW_SECONDS", 0.0)   # every compile counts as slow
    o = nd.Options()
    o.fusion_min_rows = 0
    make = lambda: nd.Dataset.range(50).map(lambda x: x + 7).batch(10).with_options(o)
    # nobody listens to the logger at INFO: lines on stderr
    monkeypatch.delenv("NBDATA_PROGRESS", raising=False)
    make().compile()
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("nbdata: compiling a pipeline (")
    assert "nbdata: compiling a pipeline: running the rewrite passes" in err
    kernel = [ln for ln in err if "compiling the kernel of fused_stage[range(" in ln]
    assert kernel and " -> map(" in kernel[0] and "-> batch(batch_size=10" in kernel[0]
    assert err[-1].startswith("nbdata: compiling a pipeline: done after ")
    # through logging when it shows INFO
    caplog.set_level(logging.INFO, logger="nbdata")
    make().compile()
    said = [r.getMessage() for r in caplog.records if r.name == "nbdata"]
    assert any("compiling the kernel of fused_stage[range(" in m for m in said)
    assert not capsys.readouterr().err
    # NBDATA_PROGRESS=0 hides it (when logging does not show it)
    caplog.set_level(logging.WARNING, logger="nbdata")
    monkeypatch.setenv("NBDATA_PROGRESS", "0")
    make().compile()
    assert not capsys.readouterr().err


# ------------------------------------------------------------------ Options().progress
def test_options_progress_shows_a_bar_per_epoch_with_the_cardinality_as_total(
        capsys, monkeypatch):
    monkeypatch.delenv("NBDATA_PROGRESS", raising=False)
    monkeypatch.setitem(sys.modules, "tqdm", None)   # the plain fallback
    o = nd.Options()
    o.progress = True
    pipe = nd.Dataset.range(100).batch(10).with_options(o).compile()
    assert sum(1 for _ in pipe) == 10 and sum(1 for _ in pipe) == 10
    lines = [ln.rsplit("\r", 1)[-1] for ln in capsys.readouterr().err.split("\n") if ln]
    assert [ln.split(" (")[0] for ln in lines] == ["epoch 1: 10/10 batch", "epoch 2: 10/10 batch"]
    o.progress = "train"
    assert sum(1 for _ in nd.Dataset.range(30).filter(lambda x: x % 3 == 0).with_options(o)) == 10
    assert capsys.readouterr().err.rsplit("\r", 1)[-1].startswith("train: 10 elem (")
    with pytest.raises(TypeError, match="Options.progress must be a bool or a title"):
        o.progress = 3
    o.progress = None
    assert sum(1 for _ in nd.Dataset.range(5).with_options(o)) == 5
    assert not capsys.readouterr().err


def test_options_progress_uses_tqdm_when_installed(monkeypatch):
    import types
    bars = []

    class FakeTqdm:
        def __init__(self, **kwargs):
            self.kwargs, self.n, self.closed = kwargs, 0, False
            bars.append(self)

        def update(self, n):
            self.n += n

        def close(self):
            self.closed = True

    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeTqdm))
    o = nd.Options()
    o.progress = True
    pipe = nd.Dataset.range(25).with_options(o).compile()
    it = iter(pipe)
    assert [int(next(it)) for _ in range(3)] == [0, 1, 2]
    (bar,) = bars
    assert bar.kwargs["total"] == 25 and bar.kwargs["desc"] == "epoch 1"
    assert bar.kwargs["unit"] == "elem" and not bar.closed
    assert sum(1 for _ in it) == 22
    assert bar.n == 25 and bar.closed


def test_a_stream_of_read_only_arrays_runs_the_kernel_compiled_at_compile(tmp_path):
    """Arrow buffers (and memory maps) are read-only, the arrays compile() warms the
    kernel with are not: the kernel takes read-only views of both, so the first epoch
    compiles nothing more (it compiled a second signature for 2.5-3.7 s before)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    x = np.arange(6000 * 4, dtype=np.float32).reshape(6000, 4)
    pq.write_table(pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), 4),
                             "y": np.arange(6000)}), tmp_path / "t.parquet")
    pipe = (nd.io.ParquetDataset(str(tmp_path / "t.parquet"), columns=["x", "y"])
            .map(lambda e: (e["x"] * 2.0, e["y"] + 1)).batch(1000).compile())
    (stage,) = pipe.fused_stages()
    kernel = stage.running()                 # the serial twin, until it has run a while
    assert len(kernel.overloads) == 1
    got = list(pipe)
    assert stage.running() is kernel and len(kernel.overloads) == 1
    np.testing.assert_array_equal(np.concatenate([b[0] for b in got]), x * 2.0)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in got]), np.arange(1, 6001))
