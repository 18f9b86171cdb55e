"""The distribute tests' Ray instance, shared by their modules (see local_ray.py)."""

import gc
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def ray_instance():
    """Ray started once per test process (each pytest-xdist worker) and shared by the
    distribute modules: a start costs seconds of CPU (its daemons and worker pool), and
    each test names its own jobs, so modules do not meet each other's. It is shut down
    after the last distribute test (see pytest_runtest_teardown): its idle daemons and
    worker hosts would otherwise take a fifth of a core from the rest of the suite."""
    pytest.importorskip("ray")
    from local_ray import start_ray
    yield start_ray()
    import ray
    ray.shutdown()


def _distribute(item) -> bool:
    return item is not None and str(item.fspath).startswith(str(Path(__file__).parent))


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last distribute test this process runs (the group runs on one worker, in
    a row) and its fixtures' teardown, Ray goes; a distribute module that still came would start it again
    (local_ray.py)."""
    if _distribute(item) and not _distribute(nextitem):
        import ray
        ray.shutdown()


@pytest.fixture(autouse=True)
def _end_unused_jobs():
    """A job and its workers end when the last handle to it goes: collect the test's
    datasets (often in reference cycles) now, so the idle workers of finished tests do
    not pile up and take CPU from the next ones."""
    yield
    gc.collect()

