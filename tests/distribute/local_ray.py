"""The local Ray instance the distribute tests run on (imported by each test module,
whose autouse fixture it becomes; the instance itself is conftest.py's, one per test
process)."""

import pytest

ray = pytest.importorskip("ray")


def start_ray():
    """Ray on 2 CPUs, unless it runs already."""
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 namespace="nbdata-tests")
    return ray


@pytest.fixture(scope="module", autouse=True)
def local_ray(request, ray_instance):
    """The module's tests on the shared Ray instance. Workers unpickle the test module's
    functions by value: they cannot import it. Named jobs stay up for the process (as
    documented); the module's are ended with it, as a Ray instance of its own would."""
    start_ray()   # after the suite's last distribute test shut it down, if more came
    ray.cloudpickle.register_pickle_by_value(request.module)
    yield
    from nbdata.distribute import consumer
    for job in list(consumer._NAMED_JOBS.values()):
        try:
            ray.kill(job, no_restart=True)      # its workers end with it (their owner)
        except ray.exceptions.ActorHandleNotFoundError:
            pass   # a handle of an earlier Ray session (a test reconnected): gone with it
    consumer._NAMED_JOBS.clear()

