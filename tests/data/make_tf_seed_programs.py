"""Records what the seed programs (tests/compat/seed_programs.py) print under TensorFlow:

    python tests/data/make_tf_seed_programs.py [NAME...] > /tmp/tf.json && mv /tmp/tf.json tests/data/tf_seed_programs.json

(with TensorFlow installed; each program runs in a fresh process)."""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "..", "compat", "run_seed_program.py")
sys.path.insert(0, os.path.join(HERE, "..", "compat"))
from seed_programs import PROGRAMS  # noqa: E402
from tf1_programs import INPUT_PROGRAMS  # noqa: E402

PROGRAMS = {**PROGRAMS, **INPUT_PROGRAMS}


def main() -> None:
    out = {}
    names = sys.argv[1:] or sorted(PROGRAMS)
    try:   # recording some programs keeps the others' recorded values
        with open(os.path.join(HERE, "tf_seed_programs.json")) as f:
            out = json.load(f)["programs"]
    except (OSError, ValueError):
        pass
    for name in names:
        with tempfile.TemporaryDirectory() as workdir:
            done = subprocess.run([sys.executable, RUNNER, name, "tensorflow", workdir],
                                  capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        if done.returncode:
            sys.exit(f"{name} failed under TensorFlow:\n{done.stderr[-3000:]}")
        out[name] = json.loads(done.stdout.strip().splitlines()[-1])
    import tensorflow as tf
    print(json.dumps({"about": f"recorded with TensorFlow {tf.__version__} by tests/data/make_tf_seed_programs.py",
                      "programs": dict(sorted(out.items()))}, indent=1))


if __name__ == "__main__":
    main()
