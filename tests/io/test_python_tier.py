"""Tier 0 (``nbdata/kernels/python_tier.py``): the record kernels' Python source, which a
first pipeline runs while Numba compiles them, gives what their machine code gives, bit
for bit, on valid and damaged input: the TFRecord and line scanners, the Example parser
(both passes) and the CSV decoder. And the mechanism: a call runs in Python only while
the machine code compiles, small enough, and where the source can run at all."""

from __future__ import annotations

import os
import random
import time

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbdata as nd
import nbdata.kernels.csv as csv_kernels
import nbdata.primitives.csv as csv_primitives
from nbdata.errors import InvalidArgumentError
from nbdata.io.fuzz import mutate
from nbdata.kernels import protobuf as pb
from nbdata.kernels import python_tier, records
from nbdata.kernels.python_tier import ColdStart, NoPythonSource
from nbdata.primitives.example import ExamplePlan, FixedLenFeature, VarLenFeature, encode_example

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
EXAMPLES = max(100, int(os.environ.get("NBDATA_HYPOTHESIS_EXAMPLES", "100")))


def _fresh(*arrays):
    return [np.array(a, copy=True) for a in arrays]


def _both(cold: ColdStart, args: tuple, outputs: tuple):
    """(result, outputs) of the machine code and of the Python source, each writing
    fresh copies of ``outputs`` (the argument positions it writes)."""
    got = []
    for run in (cold.kernel, cold.run_python):
        call = list(args)
        for i in outputs:
            call[i] = np.array(args[i], copy=True)
        result = run(*call)
        got.append((result, [call[i] for i in outputs]))
    return got


def _same(got) -> None:
    (r1, o1), (r2, o2) = got
    assert tuple(int(v) for v in r1) == tuple(int(v) for v in r2)
    for a, b in zip(o1, o2):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


# ------------------------------------------------------------------ scanners

def _tfrecord_files():
    names = ["examples.tfrecord", "examples_b.tfrecord", "corrupt_data_crc.tfrecord",
             "corrupt_length_crc.tfrecord", "truncated.tfrecord"]
    return [open(os.path.join(DATA, n), "rb").read() for n in names
            if os.path.exists(os.path.join(DATA, n))]


@pytest.mark.parametrize("seed", range(4))
def test_tfrecord_scanner_python_source_matches_machine_code(seed):
    rng = random.Random(seed)
    files = _tfrecord_files()
    assert len(files) >= 3
    for i in range(60):
        raw = files[i % len(files)] if i < len(files) else mutate(rng.choice(files), rng)
        buf = np.frombuffer(raw, np.uint8).copy()
        lo = rng.choice([0, 0, min(len(buf), 12)])
        want = rng.choice([1, 2, 5, 1000])
        max_bytes = rng.choice([1 << 20, 64, 200])
        for verify in (True, False):
            out = np.zeros(len(buf) - lo + 1, np.uint8)
            offsets = np.zeros(want + 1, np.int64)
            args = (buf, lo, len(buf), want, max_bytes, out, offsets, verify)
            _same(_both(records.scan_tfrecords_cold, args, (5, 6)))


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.binary(max_size=300), st.booleans(), st.booleans(), st.integers(0, 40),
       st.integers(1, 400), st.integers(0, 20))
def test_line_scanner_python_source_matches_machine_code(text, final, one_cr, want, max_bytes,
                                                         lo):
    raw = bytes(b if b % 5 else (10 if b % 2 else 13) for b in text)  # many \n and \r
    buf = np.frombuffer(raw + b"\0" * 16, np.uint8).copy()
    hi = len(raw)
    lo = min(lo, hi)
    out = np.zeros(hi - lo + 16, np.uint8)
    offsets = np.zeros(want + 1, np.int64)
    args = (buf, lo, hi, final, want, max_bytes, out, offsets, one_cr)
    _same(_both(records.scan_lines_cold, args, (6, 7)))


# ------------------------------------------------------------------ Example parser

FEATURES = [
    {"x": FixedLenFeature([3], np.float32), "label": FixedLenFeature([], np.int64),
     "id": FixedLenFeature([], nd.string)},
    {"x": FixedLenFeature([2], np.float32, default_value=[0.5, -1.0]),
     "n": FixedLenFeature([], np.int64, default_value=7),
     "s": FixedLenFeature([], nd.string, default_value=b"none"),
     "v": VarLenFeature(np.float32), "w": VarLenFeature(np.int64), "t": VarLenFeature(nd.string)},
]


def _records(rng: random.Random, n: int) -> list:
    out = []
    for i in range(n):
        values = {"x": [rng.uniform(-1e6, 1e6) for _ in range(rng.choice([2, 3, 3, 4]))],
                  "label": rng.choice([i, -i, 2**63 - 1, -2**63]),
                  "id": b"id-%d" % i,
                  "n": rng.randrange(-2**40, 2**40),
                  "s": bytes(rng.randrange(256) for _ in range(rng.randrange(5))),
                  "v": np.array([rng.random() for _ in range(rng.randrange(4))], np.float32),
                  "w": np.array([rng.randrange(-2**63, 2**63) for _ in range(rng.randrange(4))],
                                np.int64),
                  "t": {"kind": "bytes_list",
                        "value": [b"a" * rng.randrange(3) for _ in range(rng.randrange(3))]}}
        keep = {k: v for k, v in values.items() if rng.random() < 0.85}
        out.append(encode_example(keep))
    return out


def _parse_args(plan, recs, single):
    data = np.frombuffer(b"".join(recs) or b"\0", np.uint8)
    data.flags.writeable = False
    offsets = np.zeros(len(recs) + 1, np.int64)
    offsets[1:] = np.cumsum([len(r) for r in recs])
    offsets.flags.writeable = False
    out = plan.outputs(len(recs))
    return data, offsets, out


@pytest.mark.parametrize("seed", range(6))
def test_example_parser_python_source_matches_machine_code(seed):
    rng = random.Random(seed)
    for features in FEATURES:
        plan = ExamplePlan(features)
        for trial in range(12):
            recs = _records(rng, rng.randrange(1, 12))
            if trial % 2:
                recs = [mutate(r, rng) if rng.random() < 0.5 else r for r in recs]
            single = trial % 3 == 0
            data, offsets, out = _parse_args(plan, recs, single)
            results = []
            for run in (pb.parse_range_cold.kernel, pb.parse_range_cold.run_python):
                fresh = pb.ExampleOutputs(*_fresh(*out))
                results.append((run(data, offsets, 0, len(recs), plan.layout, fresh, single),
                                fresh))
            (r1, o1), (r2, o2) = results
            assert tuple(int(v) for v in r1) == tuple(int(v) for v in r2)
            if int(r1[0]) >= 0:
                continue
            for a, b in zip(o1, o2):
                assert a.tobytes() == b.tobytes()
            # Pass 2 (VarLen values) from the same pass-1 outputs.
            cnt = o1.var_cnt
            if cnt.size:
                vstart = np.zeros_like(cnt)
                flat = np.cumsum(cnt.reshape(-1))
                vstart.reshape(-1)[1:] = flat[:-1]
                total = int(flat[-1]) if flat.size else 0
                buffers = (np.zeros(total, np.uint32), np.zeros(total, np.int64),
                           np.zeros(total, np.int64), np.zeros(total, np.int64))
                args = (data, 0, len(recs), plan.layout, o1, vstart) + buffers
                _same([(r, o) for r, o in [(x[0] or (0,), x[1]) for x in
                                           _both(pb.fill_varlen_range_cold, args,
                                                 (6, 7, 8, 9))]])


# ------------------------------------------------------------------ CSV decoder

class _Serial:
    """A tiered CSV kernel that always takes its serial path (tier 0 or the twin)."""

    serial = csv_kernels.decode_rows_parallel.serial

    def call_or(self, args, run_serial, compiled_by, counts=True):
        return run_serial()


class _Forced:
    """The cold CSV kernel, run by its machine code or its Python source."""

    cold = python_tier.cold_start(csv_kernels.decode_rows_parallel.serial, 1)

    def __init__(self, python: bool):
        self.python = python
        self.calls = 0

    def call(self, args, work):
        self.calls += 1
        return self.cold.run_python(*args) if self.python else self.cold.kernel(*args)


def _decode(lines, defaults, python: bool, monkeypatch, **kw):
    forced = _Forced(python)
    with monkeypatch.context() as m:
        m.setattr(csv_primitives, "_configs", {})
        m.setattr(csv_kernels, "decode_plain_rows_parallel", _Serial())
        m.setattr(csv_kernels, "decode_rows_parallel", _Serial())
        m.setattr(csv_primitives, "cold_start", lambda kernel, work: forced)
        try:
            cols = nd.io.decode_csv(lines, defaults, **kw)
        except InvalidArgumentError as e:
            return ("error", str(e))
    assert forced.calls >= 1
    return [np.asarray(c).view(np.uint8).tobytes() if np.asarray(c).dtype != object
            else list(c) for c in cols]


FIELDS = st.sampled_from([
    "0", "-1", "+7", "2147483647", "2147483648", "-9223372036854775808",
    "9223372036854775808", "1.5", "-0.0", ".5", "5.", "1e300", "1e-400", "2E+3", "1e99999",
    "1e256", "2e-257", "3e260", "-1.5e256",
    "3.4028235e38", "1e-46", "0.1", "16777217", " 12 ", "\t3", "nan", "inf", "0x10", "1.2.3",
    "", '"q"', '"a,b"', '"x""y"', '"open', 'in"side', "abc", "NA", "\xe9", "12a", "--1",
])


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.data())
def test_csv_decoder_python_source_matches_machine_code(data):
    kinds = data.draw(st.lists(st.sampled_from([np.int32, np.int64, np.float32, np.float64,
                                                 "string"]), min_size=1, max_size=4))
    defaults = [[b"d"] if t == "string" else
                data.draw(st.sampled_from([[], [np.dtype(t).type(3)]])) for t in kinds]
    rows = [[data.draw(FIELDS) for _ in kinds] for _ in range(data.draw(st.integers(1, 6)))]
    if data.draw(st.booleans()):
        rows[-1] = rows[-1] + ["9"]
    lines = [",".join(r).encode() for r in rows]
    kw = data.draw(st.sampled_from([{}, {"na_value": "NA"}, {"use_quote_delim": False},
                                    {"select_cols": [0]}]))
    mp = pytest.MonkeyPatch()
    try:
        assert _decode(lines, defaults, True, mp, **kw) == _decode(lines, defaults, False, mp,
                                                                   **kw)
    finally:
        mp.undo()


# ------------------------------------------------------------------ the mechanism

@numba.njit
def _step(x):
    return x * np.int64(3) + np.int64(1)


def _walk(a, out):
    for i in numba.prange(len(a)):
        out[i] = _step(a[i]) - 300      # a uint8 item widened, as Numba does
    return len(a)


def test_a_cold_kernel_runs_python_while_compiling_then_machine_code(monkeypatch):
    monkeypatch.setattr(python_tier, "ENABLED", True)
    cold = ColdStart(numba.njit(parallel=False)(_walk), first_work=100)
    a = np.arange(250, 256, dtype=np.uint8)
    out = np.zeros(6, np.int64)
    assert cold.call((a, out), 6) == 6
    assert out.tolist() == [int(v) * 3 + 1 - 300 for v in a]   # no uint8 wrap-around
    assert cold.python_calls == 1 and cold.seconds_per_work is not None
    # Too much work for Python: the call waits for the machine code.
    out2 = np.zeros(6, np.int64)
    assert cold.call((a, out2), 10**9) == 6 and out2.tolist() == out.tolist()
    assert cold.python_calls == 1 and cold.kernel.signatures
    # Ready: machine code from now on, whatever the size.
    assert cold.call((a, out2), 1) == 6 and cold.python_calls == 1


def test_a_first_call_larger_than_first_work_waits(monkeypatch):
    monkeypatch.setattr(python_tier, "ENABLED", True)
    cold = ColdStart(numba.njit(_walk), first_work=5)
    out = np.zeros(6, np.int64)
    cold.call((np.arange(6, dtype=np.uint8), out), 6)
    assert cold.python_calls == 0 and out.tolist() == [i * 3 + 1 - 300 for i in range(6)]


def test_without_the_tier_the_first_call_compiles(monkeypatch):
    monkeypatch.setattr(python_tier, "ENABLED", False)
    cold = ColdStart(numba.njit(_walk), first_work=100)
    out = np.zeros(3, np.int64)
    cold.call((np.arange(3, dtype=np.uint8), out), 3)
    assert cold.python_calls == 0 and cold.kernel.signatures


def test_a_python_source_that_raises_leaves_the_call_to_machine_code(monkeypatch):
    monkeypatch.setattr(python_tier, "ENABLED", True)

    def reads_past(a):
        return a[len(a)]          # Numba reads out of bounds silently; Python raises

    cold = ColdStart(numba.njit(reads_past), first_work=100)
    a = np.zeros(4, np.int64)
    cold.call((a,), 1)            # whatever the machine code read: no IndexError
    assert cold.python_calls == 0


def test_outputs_a_failed_python_call_wrote_are_restored_for_the_machine_code(monkeypatch):
    """The machine code may count on arrays the caller zeroed: what the Python source
    wrote before it raised is undone first."""
    monkeypatch.setattr(python_tier, "ENABLED", True)

    def marks(a, flags):
        for i in range(len(a)):
            if a[i] > 0:
                flags[i] = 1
        return a[len(a)]          # Python raises here; Numba reads past the end

    cold = ColdStart(numba.njit(marks), first_work=100)
    flags = np.zeros(4, np.int8)
    a = np.array([1, 1, 1, 1], np.int64)
    assert cold._python() is not None       # (the Python source of ``marks``)
    real = numba.njit(lambda a, flags: 0)   # machine code that writes nothing
    monkeypatch.setattr(cold, "kernel", real)
    cold.call((a, flags), 1)
    assert cold.python_calls == 0 and flags.tolist() == [0, 0, 0, 0]


def test_an_intrinsic_without_a_python_equivalent_has_no_python_source():
    from numba.extending import intrinsic
    from numba.core import types

    @intrinsic
    def _ident(typingctx, x):
        def codegen(context, builder, signature, args):
            return args[0]
        return types.int64(types.int64), codegen

    def uses(x):
        return _ident(x)

    cold = ColdStart(numba.njit(uses), first_work=100)
    with pytest.raises(NoPythonSource):
        cold.run_python(np.int64(1))
    assert cold.call((np.int64(4),), 1) == 4 and cold.python_calls == 0


def test_python_calls_do_not_count_toward_compiling_the_parallel_decoder(monkeypatch):
    """A long CSV decode run by the twin's Python source (the twin still compiling) is
    no measure of the twin's speed: it does not promote the parallel kernel."""
    from nbdata.kernels import tiers
    monkeypatch.setattr(python_tier, "ENABLED", True)
    fresh = tiers.TieredKernel(csv_kernels.decode_rows_parallel.py_func, {"nogil": True})
    monkeypatch.setattr(csv_kernels, "decode_rows_parallel", fresh)
    monkeypatch.setattr(csv_primitives, "_configs", {})
    monkeypatch.setattr(csv_kernels, "fast_rows_apply", lambda *a: False)
    promoted = []
    monkeypatch.setattr(tiers, "PARALLEL_AFTER", 1e-9)
    monkeypatch.setattr(tiers.TieredKernel, "_promote",
                        lambda self, sig, tier: promoted.append(self.py_func.__name__))
    lines = np.array([f"{i},{i / 4}".encode() for i in range(5000)], dtype=object)
    ints, halves = nd.io.decode_csv(lines, [[0], [0.0]])   # two blocks: a counted size
    cold = python_tier.cold_start(fresh.serial, 1)
    assert cold.python_calls == 1 and promoted == []
    np.testing.assert_array_equal(halves, np.arange(5000, dtype=np.float32) / 4)


def test_the_library_kernels_have_python_sources():
    for cold in (records.scan_tfrecords_cold, records.scan_lines_cold, pb.parse_range_cold,
                 pb.fill_varlen_range_cold,
                 python_tier.cold_start(csv_kernels.decode_rows_parallel.serial, 1)):
        assert callable(python_tier.python_source(cold.kernel))


def test_a_fresh_process_reads_its_first_tfrecord_batch_in_python(tmp_path):
    """A process with an empty Numba cache: the first batch comes from the Python tier,
    with the values of the reference file, long before the parser has compiled."""
    import json
    import subprocess
    import sys
    code = (
        "import time, json, numpy as np, nbdata as nd\n"
        "from nbdata.kernels import records, protobuf\n"
        f"path = {os.path.join(DATA, 'examples.tfrecord')!r}\n"
        "t = time.perf_counter()\n"
        "first = next(iter(nd.TFRecordDataset(path).batch(2)))\n"
        "took = time.perf_counter() - t\n"
        "print(json.dumps({'took': took, 'python': records.scan_tfrecords_cold.python_calls,\n"
        "                  'first': [bytes(r).hex() for r in first]}))\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               NBDATA_CACHE_DIR=str(tmp_path / "nbdata"), NBDATA_PYTHON_TIER="1")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300, check=True)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["python"] >= 1
    raw = open(os.path.join(DATA, "examples.tfrecord"), "rb").read()
    # The first two records of the file, framed by hand.
    expect, pos = [], 0
    for _ in range(2):
        n = int.from_bytes(raw[pos:pos + 8], "little")
        expect.append(raw[pos + 12:pos + 12 + n].hex())
        pos += 12 + n + 4
    assert got["first"] == expect
    # The process waited for the compile at its exit: the next one loads the scanner.
    cached = [n for _, _, names in os.walk(tmp_path) for n in names
              if n.endswith(".nbi") and "records" in n]
    assert cached


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() only")
def test_a_fork_waits_for_a_background_compile():
    """A child forked while a kernel compiles in the background would inherit Numba's
    compiler lock held by a thread it lacks, and hang at its first compile."""
    import subprocess
    import sys
    code = (
        "import os, numba, numpy as np\n"
        "from nbdata.kernels import python_tier\n"
        "python_tier.ENABLED = True\n"
        "def walk(a, out):\n"
        "    for i in range(len(a)):\n"
        "        out[i] = a[i] * 2 + 1\n"
        "    return len(a)\n"
        "cold = python_tier.ColdStart(numba.njit(walk), first_work=100)\n"
        "out = np.zeros(4, np.int64)\n"
        "cold.call((np.arange(4), out), 4)\n"
        "assert cold.python_calls == 1\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    f = numba.njit(lambda x: x + 1)\n"
        "    os._exit(0 if f(41) == 42 else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print('child', os.waitstatus_to_exitcode(status))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=90, check=True)   # (a hung child: TimeoutExpired)
    assert done.stdout.strip().endswith("child 0"), done.stdout + done.stderr


def test_a_tfrecord_scan_in_python_is_bounded_by_bytes(monkeypatch, tmp_path):
    """Tier 0 sizes a scan by the bytes it may frame (the first record's length is read
    first), so records of images never run through the Python CRC; a scan it does run
    stops after PYTHON_SCAN_BYTES of records: the same records, in more calls."""
    seen = []

    class Recorder:
        def call(self, args, work, python_args=None):
            seen.append((work, python_args[4] if python_args else None))
            return records.scan_tfrecords(*args)

    first_work = records.scan_tfrecords_cold.first_work
    monkeypatch.setattr(records, "scan_tfrecords_cold", Recorder())
    big = tmp_path / "big.tfrecord"
    with nd.io.TFRecordWriter(str(big)) as w:
        w.write(b"x" * 200_000)
        w.write(b"y" * 10)
    got = [bytes(r) for r in nd.TFRecordDataset(str(big))]
    assert got == [b"x" * 200_000, b"y" * 10]
    assert seen[0][0] > first_work   # (too much for a first Python call)
    small = tmp_path / "small.tfrecord"
    with nd.io.TFRecordWriter(str(small)) as w:
        for i in range(3000):
            w.write(b"r%04d" % i + b"." * 100)
    seen.clear()
    assert len(list(nd.TFRecordDataset(str(small)).batch(1024))) == 3
    work, limit = seen[0]
    assert limit == records.PYTHON_SCAN_BYTES and work <= limit + 200
    # The Python source with that limit stops sooner, at a record boundary.
    buf = np.frombuffer(small.read_bytes(), np.uint8).copy()
    out, offsets = np.zeros(len(buf), np.uint8), np.zeros(3001, np.int64)
    n, pos, status, _ = records.ColdStart(records.scan_tfrecords, 1).run_python(
        buf, 0, len(buf), 3000, records.PYTHON_SCAN_BYTES, out, offsets, True)
    assert 0 < n < 3000 and status == 0 and pos == n * (12 + 105 + 4)


def test_a_line_scan_in_python_is_bounded_by_bytes(monkeypatch, tmp_path):
    """A line scan's tier-0 size ends at the first newline PYTHON_SCAN_BYTES in (the
    scan, told to stop at that many bytes, stops there); a \\r before it, which the scan
    may drop, makes the whole window count."""
    seen = []

    class Recorder:
        def call(self, args, work, python_args=None):
            seen.append((work, args[2] - args[1], python_args[5]))
            return records.scan_lines(*args)

    monkeypatch.setattr(records, "scan_lines_cold", Recorder())
    lf = tmp_path / "lf.txt"
    lf.write_bytes(b"".join(b"line %06d\n" % i for i in range(30_000)))
    assert len(list(nd.TextLineDataset(str(lf)))) == 30_000
    work, window, limit = seen[0]
    assert limit == records.PYTHON_SCAN_BYTES and limit < work <= limit + 12 < window
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"".join(b"line %06d\r\n" % i for i in range(30_000)))
    seen.clear()
    assert [bytes(x) for x in nd.TextLineDataset(str(crlf)).take(2)] == [b"line 000000",
                                                                         b"line 000001"]
    work, window, _ = seen[0]
    assert work == window
