"""The distribute tests' Ray instance, shared by their modules (see local_ray.py)."""

import gc

import pytest


@pytest.fixture(scope="session")
def ray_instance():
    """Ray on 2 CPUs, started once per test process (each pytest-xdist worker) and shared
    by the distribute modules: a start costs seconds of CPU (its daemons and worker pool),
    and each test names its own jobs, so modules do not meet each other's."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 namespace="nbdata-tests")
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(autouse=True)
def _end_unused_jobs():
    """A job and its workers end when the last handle to it goes: collect the test's
    datasets (often in reference cycles) now, so the idle workers of finished tests do
    not pile up and take CPU from the next ones."""
    yield
    gc.collect()


def pytest_collection_modifyitems(config, items):
    """Every distribute test in one pytest-xdist group (``--dist loadgroup``, set in
    pyproject.toml): one Ray instance for the run instead of one per xdist worker, whose
    daemons and actor processes would compete with each other for the cores."""
    here = str(__import__("pathlib").Path(__file__).parent)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.xdist_group("ray"))
