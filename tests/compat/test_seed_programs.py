"""The input-pipeline programs of the seed documents (tests/compat/seed_programs.py) run
through ``import nbdata.compat.v1 as tf`` and print what TensorFlow's tf.compat.v1
prints for them: recorded in tests/data/tf_seed_programs.json, or live (each program in
a fresh TensorFlow process) when TensorFlow is installed."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run_seed_program import run  # noqa: E402
from seed_programs import PROGRAMS  # noqa: E402
from tf1_programs import INPUT_PROGRAMS  # noqa: E402

PROGRAMS = {**PROGRAMS, **INPUT_PROGRAMS}

RECORDED = json.loads((HERE.parent / "data" / "tf_seed_programs.json").read_text())["programs"]
HAVE_TF = importlib.util.find_spec("tensorflow") is not None


_LIVE: dict = {}


def tensorflow_prints(name: str, workdir: str) -> list:
    if not HAVE_TF:
        return RECORDED[name]
    if not _LIVE:   # every program in one TensorFlow process (one import, not one each)
        done = subprocess.run([sys.executable, str(HERE / "run_seed_program.py"), "--all",
                               "tensorflow", workdir], capture_output=True, text=True,
                              timeout=900, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        assert done.returncode == 0, done.stderr[-2000:]
        _LIVE.update(json.loads(done.stdout.strip().splitlines()[-1]))
    return _LIVE[name]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_seed_program_prints_what_tensorflow_prints(name, tmp_path):
    ours = tmp_path / "nbdata"
    theirs = tmp_path / "tensorflow"
    ours.mkdir()
    theirs.mkdir()
    assert run(name, "nbdata", str(ours)) == tensorflow_prints(name, str(theirs))


def test_every_program_has_a_recording():
    assert sorted(RECORDED) == sorted(PROGRAMS)
