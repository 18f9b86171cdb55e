"""The profiler (nbdata/profiler.py): Chrome trace-event JSON that Perfetto's JSON
importer takes (schema and proper nesting checked here), slices for stages, kernels,
Python fallbacks and producer/consumer waits; Options().profile; `python -m nbdata
profile`; the input-bound summary of pipe.stats(); progress of long CLI work."""

import json
import os
import subprocess
import sys
import time

import numpy as np

import nbdata as nd
from nbdata import profiler

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def check_trace_schema(doc: dict) -> list:
    """What Perfetto's JSON importer and chrome://tracing need: a traceEvents list of
    complete ("X") slices with numeric ts/dur (microseconds), pid and tid, metadata
    ("M") naming the process and each thread, and slices of one thread that nest (any
    two either are disjoint or one contains the other). Returns the slices."""
    assert set(doc) >= {"traceEvents", "displayTimeUnit"} and doc["displayTimeUnit"] == "ms"
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    assert len(slices) + len(meta) == len(doc["traceEvents"])
    for e in slices:
        assert set(e) <= {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}
        assert isinstance(e["name"], str) and isinstance(e["cat"], str)
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e.get("args", {}), dict)
    names = {(e["name"], e["tid"]) for e in meta}
    assert any(n == "process_name" for n, _ in names)
    for tid in {e["tid"] for e in slices}:
        assert ("thread_name", tid) in names
        spans = sorted(((e["ts"], e["ts"] + e["dur"]) for e in slices if e["tid"] == tid),
                       key=lambda s: (s[0], -s[1]))
        open_ = []
        for begin, end in spans:
            while open_ and open_[-1] <= begin + 1e-3:
                open_.pop()
            assert not open_ or end <= open_[-1] + 1e-3, "slices of a thread overlap"
            open_.append(end)
    return slices


def readme_pipeline(rows=40_000):
    """The README's tour pipeline (smaller), whose prefetch hands batches over from a
    producer thread."""
    X = np.random.default_rng(0).random((rows, 16), dtype=np.float32)
    y = np.arange(rows)
    return (nd.Dataset.from_tensor_slices((X, y)).shuffle(10_000, seed=1)
            .map(lambda x, l: ((x - 0.5) * 2.0, l)).filter(lambda x, l: l % 3 != 0)
            .batch(256).prefetch(nd.AUTOTUNE))


def test_the_readme_pipeline_s_trace_opens_and_shows_a_producer_consumer_wait(tmp_path):
    pipe = readme_pipeline().compile()
    path = tmp_path / "trace.json"
    with pipe.profile(str(path)):
        n = sum(len(y) for _, y in pipe)
    assert n == sum(1 for v in range(40_000) if v % 3)
    slices = check_trace_schema(json.loads(path.read_text()))
    waits = [e for e in slices if e["cat"] == "wait"]
    assert waits and all(e["name"].startswith("wait for prefetch") for e in waits)
    threads = {e["tid"]: e for e in json.loads(path.read_text())["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    producers = {e["tid"] for e in slices if e["cat"] in ("stage", "kernel")
                 and "prefetch" not in e["name"]}
    consumer = {e["tid"] for e in waits}
    assert producers and consumer and not producers & consumer   # two tracks
    assert any(threads[t]["args"]["name"] == "nbdata-prefetch" for t in producers)
    assert any(e["cat"] == "kernel" and e["args"]["rows"] > 0 for e in slices)


def test_per_element_python_stages_are_their_own_category(tmp_path):
    o = nd.Options()
    o.fusion_min_rows = 0
    ds = nd.Dataset.range(20).map(lambda x: int(str(x))).with_options(o)   # Python per element
    path = tmp_path / "t.json"
    with profiler.profile(str(path)):
        assert [int(v) for v in ds] == list(range(20))
    slices = check_trace_schema(json.loads(path.read_text()))
    assert any(e["cat"] == "python" and e["name"].startswith("map") for e in slices)


def test_options_profile_writes_the_trace_when_an_iteration_ends(tmp_path):
    path = tmp_path / "opt.json"
    o = nd.Options()
    o.profile = str(path)
    o.fusion_min_rows = 0
    try:
        assert [int(v) for v in nd.Dataset.range(50).map(lambda x: x + 1).with_options(o)] == \
            list(range(1, 51))
        slices = check_trace_schema(json.loads(path.read_text()))
        assert any(e["cat"] == "kernel" for e in slices)
    finally:
        profiler.stop()


def test_python_m_nbdata_profile_runs_a_script_and_writes_its_trace(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import sys, time\nimport nbdata as nd\n"
                      "for b in nd.Dataset.range(3000).batch(100).prefetch(1):\n"
                      "    time.sleep(0.002)\n"
                      "sys.exit(int(sys.argv[1]))\n")
    out = tmp_path / "out.json"
    done = subprocess.run([sys.executable, "-m", "nbdata", "profile", "-o", str(out),
                           str(script), "3"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3, done.stderr
    assert f"trace written to {out}" in done.stderr
    slices = check_trace_schema(json.loads(out.read_text()))
    assert any(e["name"].startswith("prefetch") for e in slices)


def test_stats_say_when_the_consumer_is_input_bound_and_which_stage_bounds_it():
    def slow(x):
        time.sleep(0.002)
        return x

    pipe = nd.Dataset.range(60).map(slow).batch(4).prefetch(1).compile()
    for _ in pipe:
        pass
    stats = pipe.stats()
    assert stats.input_share > 0.6
    assert stats.bounding_stage().title.startswith("map")
    text = stats.summary()
    assert "input-bound" in text and "bounding stage: map" in text

    fast = nd.Dataset.range(60).batch(4).prefetch(1).compile()
    for _ in fast:
        time.sleep(0.003)
    summary = fast.stats().summary()
    assert fast.stats().input_share < 0.5 and "consumer's own work dominates" in summary
    assert "autotune" not in summary or "buffer rows" in summary


def test_autotune_choices_say_why():
    def work(x):
        time.sleep(0.0002)
        return x

    pipe = nd.Dataset.range(400).map(work, num_parallel_calls=nd.AUTOTUNE) \
        .prefetch(nd.AUTOTUNE).compile()
    for _ in pipe:
        time.sleep(0.0005)
    lines = [line for line in pipe.stats().summary().splitlines() if line.startswith("autotune")]
    assert any("parallelism=" in line and "(" in line for line in lines), lines
    assert any("buffer rows=" in line for line in lines), lines


def test_long_cli_work_shows_progress(tmp_path):
    path = tmp_path / "r.tfrecord"
    with nd.io.TFRecordWriter(str(path)) as w:
        for i in range(3000):
            w.write(b"x" * 10)
    env = dict(os.environ, NBDATA_PROGRESS="1")
    done = subprocess.run([sys.executable, "-m", "nbdata", "inspect", str(path)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "3,000 records" in done.stdout
    assert "r.tfrecord: 3,000 records" in done.stderr   # the progress line's last state
    quiet = subprocess.run([sys.executable, "-m", "nbdata", "inspect", str(path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert quiet.stderr == ""   # not a terminal: no progress
