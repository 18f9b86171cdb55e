"""The local Ray instance the distribute tests run on (imported by each test module,
whose autouse fixture it becomes)."""

import pytest

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module", autouse=True)
def local_ray(request):
    """Ray on 2 CPUs for the module's tests (or the instance already running). Workers
    unpickle the test module's functions by value: they cannot import it."""
    ray.cloudpickle.register_pickle_by_value(request.module)
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 namespace="nbdata-tests")
    yield
    if started:
        ray.shutdown()
