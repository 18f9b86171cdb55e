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


# Tests that must share one pytest-xdist worker, by path prefix: the distribute tests
# run on one local Ray instance, started once (tests/distribute/conftest.py). The
# groups are made here, by the scheduler, from the test ids: pytest-xdist's own
# xdist_group marks are read from an attribute pytest 9.2 no longer uses for test ids,
# so with it the distribute tests were spread over every worker, each starting a Ray
# instance of its own.
_XDIST_GROUPS = {"tests/distribute/": "ray"}


@pytest.hookimpl(optionalhook=True)   # (a hook of pytest-xdist: absent without it)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` (pyproject.toml): each test its own unit of work, except
    the groups above, each one unit that runs on one worker in a row."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class PathGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            for prefix, group in _XDIST_GROUPS.items():
                if nodeid.startswith(prefix):
                    return group
            return nodeid

    return PathGroups(config, log)


def pytest_configure(config):
    config.addinivalue_line("markers", "host_only: a test in tests/gpu or tests/examples that "
                            "runs no GPU work (not repeated per GPU backend)")
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        _compile_sources()


def _compile_sources():
    """Byte-compiles nbdata's sources once, in the first pytest process, where Python
    will not write bytecode itself (``PYTHONDONTWRITEBYTECODE``, as in CI's containers).
    The tests import nbdata from this checkout, in every pytest-xdist worker and in the
    processes tests start (Ray's actors, the fresh-process tests); without ``.pyc``
    files each of them compiled all of nbdata's modules again, 0.7 s of CPU per process.
    The files go to the checkout's ``__pycache__`` directories (git-ignored), where
    Python would have put them."""
    if not sys.dont_write_bytecode:
        return   # the first process to import a module writes its bytecode
    import compileall
    compileall.compile_dir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "nbdata"),
                           quiet=2)   # silent: an optimization (a read-only checkout skips it)


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After each test and its fixtures' teardown: collect the test's garbage, then
    freeze what is left (``gc.freeze``) so later collections skip it. A worker holds
    Numba's and nbdata's millions of long-lived objects (compiled functions, types, IR
    caches); without this every full collection walked them all again, 0.1-0.2 s each,
    and the tests that wait for threads to go (``gc.collect()`` in a loop) or check the
    CUDA rules after each test (one collection each) spent a sixth of the suite's time
    there. Only the cyclic collector skips frozen objects: reference counting still
    frees them, and a test's own objects are collected as before (it is they that are
    new)."""
    yield
    import gc
    gc.collect()
    gc.freeze()


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
