"""Mutation fuzzing of readers and decoders: only nd.errors exceptions, never another
exception, a crash or a hang. ``NBDATA_FUZZ_CASES`` sets the count (default 1,500);
``python -m nbdata fuzz --cases 100000`` runs the full count."""

import os

from nbdata.io.fuzz import fuzz, mutate


def test_mutations_raise_only_nd_errors():
    # 1,500 by default (was 3,000; the cases are the first 1,500 of those, the same
    # seed): 300 a target over the 5 targets, and each of mutate()'s 7 kinds of edit
    # still comes 92-120 times on every target.
    cases = int(os.environ.get("NBDATA_FUZZ_CASES", "1500"))
    lines = []
    assert fuzz(cases, seed=7, out=lines.append) == [], "\n".join(lines)


def test_mutate_changes_its_input():
    import random
    rng = random.Random(0)
    seed = bytes(range(64))
    assert sum(mutate(seed, rng) != seed for _ in range(50)) >= 45


# Hypothesis drives the same targets: arbitrary bytes, and shrinking mutations of the
# valid inputs, so a failure is reported as a minimal input.
import tempfile  # noqa: E402

import pytest  # noqa: E402
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from nbdata.errors import OpError  # noqa: E402
from nbdata.io.fuzz import _targets  # noqa: E402

_WORKDIR = tempfile.TemporaryDirectory(prefix="nbdata-fuzz-")
_TARGETS = _targets(_WORKDIR.name)


def _consume(target, data):
    try:
        target.run(data)
    except OpError:
        pass


@pytest.mark.parametrize("target", _TARGETS, ids=[t.name for t in _TARGETS])
@given(data=st.binary(max_size=600))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_arbitrary_bytes_raise_only_nd_errors(target, data):
    _consume(target, data)


@pytest.mark.parametrize("target", _TARGETS, ids=[t.name for t in _TARGETS])
@given(edits=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255),
                                st.sampled_from(["set", "insert", "delete", "cut"])),
                      min_size=1, max_size=4))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
def test_edited_valid_inputs_raise_only_nd_errors(target, edits):
    buf = bytearray(target.seed)
    for at, value, how in edits:
        at %= len(buf) + 1
        if how == "set" and buf:
            buf[min(at, len(buf) - 1)] = value
        elif how == "insert":
            buf[at:at] = bytes([value]) * (1 + value % 9)
        elif how == "delete":
            del buf[at:at + 1 + value % 16]
        else:
            del buf[at:]
    _consume(target, bytes(buf))
