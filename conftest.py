"""Pytest settings for the whole repository (loaded before any test imports Numba).

Numba starts ``NUMBA_NUM_THREADS`` threads, by default one per core; tests that run
kernels at two threads need two even on a one-core machine, so at least 2 are
started.

``NBDATA_STRICT=1``: where nbdata falls back from a fast path because recording or
lifting a function failed, an error raised inside nbdata's own code is raised instead
(an internal bug fails the test; users still fall back).

The GPU tests (tests/gpu) run their kernels in Numba's CUDA simulator unless
``NBDATA_GPU_TESTS=device`` asks for the real GPU: the simulator must be switched on
before Numba is first imported, which is here. It only affects ``numba.cuda``.
"""

import os
import sys

import pytest

os.environ.setdefault("NUMBA_NUM_THREADS", str(max(2, os.cpu_count() or 1)))
os.environ.setdefault("NBDATA_STRICT", "1")
if os.environ.get("NBDATA_GPU_TESTS", "sim") != "device":
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

# The GPU tests (tests/gpu, tests/examples) run twice where no GPU is asked for: on the
# simulator's synchronous backend ("sim") and on the CUDA-rules double ("rules",
# tests/gpu/cuda_rules.py: nbdata's real CUDA backend against a stand-in GPU that runs
# work asynchronously per stream, poisons freed memory and fails on unordered access).
# NBDATA_GPU_TESTS=sim or =rules runs only one of them; =device the real GPU.
_GPU_TESTS = os.environ.get("NBDATA_GPU_TESTS", "both")
_GPU_DIRS = (os.path.join("tests", "gpu"), os.path.join("tests", "examples"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "gpu"))


def pytest_generate_tests(metafunc):
    path = str(metafunc.definition.path)
    if "gpu_backend" not in metafunc.fixturenames or not any(d in path for d in _GPU_DIRS):
        return
    if _GPU_TESTS == "device" or path.endswith("test_cuda_backend.py"):
        return
    if metafunc.definition.get_closest_marker("host_only") is not None:
        return   # runs no GPU work: one run, not one per GPU backend
    kinds = ["sim", "rules"] if _GPU_TESTS == "both" else [_GPU_TESTS]
    metafunc.parametrize("gpu_backend", kinds, indirect=True)


def pytest_configure(config):
    config.addinivalue_line("markers", "host_only: a test in tests/gpu or tests/examples that "
                            "runs no GPU work (not repeated per GPU backend)")


@pytest.fixture(autouse=True)
def gpu_backend(request):
    """The GPU backend of a GPU test: the CUDA-rules double for "rules" (seeded by the
    test's name; NBDATA_CUDA_RULES_SEED adds to it), else what runtime.backend() picks."""
    if getattr(request, "param", None) != "rules":
        yield None
        return
    import zlib

    import cuda_rules
    seed = zlib.crc32(request.node.nodeid.encode()) + int(os.environ.get("NBDATA_CUDA_RULES_SEED", "0"))
    with cuda_rules.installed(seed) as machine:
        yield machine
