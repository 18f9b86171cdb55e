"""Runs one program of seed_programs.py and prints what it printed as JSON:
``python run_seed_program.py NAME {nbdata|tensorflow} WORKDIR`` (a fresh process, so
that TensorFlow's graph mode or nbdata's stays in it); ``--all`` runs every program in
one process (one TensorFlow import) and prints ``{name: printed}``."""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed_programs import PROGRAMS  # noqa: E402
from tf1_programs import HELPERS, INPUT_PROGRAMS  # noqa: E402


def run(name: str, library: str, workdir: str) -> list:
    if library == "tensorflow":
        import types

        import tensorflow.compat.v1 as tf1
        tf1.disable_eager_execution()
        # TF 2's compat.v1 has no tf.contrib: its make_saveable_from_iterator moved to
        # tf.data.experimental.
        tf = types.SimpleNamespace(**{k: getattr(tf1, k) for k in dir(tf1) if not k.startswith("__")})
        tf.contrib = types.SimpleNamespace(data=tf1.data.experimental)
    else:
        import nbdata.compat.v1 as tf
    printed = []

    def record(*args, **kwargs):
        printed.append(" ".join(str(a) for a in args))

    scope = {"tf": tf, "np": np, "print": record, "workdir": workdir,
             "expect_fused": expect_fused if library == "nbdata" else lambda ds: None}
    if name in INPUT_PROGRAMS:
        # Only the import changed: nbdata's namespace is in graph mode by itself (a
        # fresh default graph stands for a fresh process).
        tf.reset_default_graph()
        exec(HELPERS + INPUT_PROGRAMS[name], scope)
        return printed
    with tf.Graph().as_default():
        exec(PROGRAMS[name], scope)
    return printed


def expect_fused(dataset) -> None:
    """Every map of ``dataset`` fuses (compiled with no row minimum)."""
    import nbdata as nd
    options = nd.Options()
    options.fusion_min_rows = 0
    text = str(dataset.with_options(options).compile().explain())
    assert "per element" not in text and "not fused" not in text, text


if __name__ == "__main__":
    if sys.argv[1] == "--all":   # every program, each in a folder of its own: {name: prints}
        names = sorted({**PROGRAMS, **INPUT_PROGRAMS})
        out = {}
        for k, name in enumerate(names):
            folder = os.path.join(sys.argv[3], str(k))
            os.makedirs(folder)
            out[name] = run(name, sys.argv[2], folder)
        print(json.dumps(out))
    else:
        print(json.dumps(run(sys.argv[1], sys.argv[2], sys.argv[3])))
