"""Mutation fuzzing of readers and decoders: only nd.errors exceptions, never another
exception, a crash or a hang. ``NBDATA_FUZZ_CASES`` sets the count (CI: a few thousand);
``python -m nbdata fuzz --cases 100000`` runs the full count."""

import os

from nbdata.io.fuzz import fuzz, mutate


def test_mutations_raise_only_nd_errors():
    cases = int(os.environ.get("NBDATA_FUZZ_CASES", "3000"))
    lines = []
    assert fuzz(cases, seed=7, out=lines.append) == [], "\n".join(lines)


def test_mutate_changes_its_input():
    import random
    rng = random.Random(0)
    seed = bytes(range(64))
    assert sum(mutate(seed, rng) != seed for _ in range(50)) >= 45
