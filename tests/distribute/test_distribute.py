"""ds.distribute on a local two-CPU Ray: both processing modes against the in-process
pipeline, shared jobs, coordinated reads, a worker killed mid-epoch, worker hosts
shared by jobs (one killed under two running jobs; a job's workers dropped when it
ends), a consumer restored from a checkpoint, argument errors, and the error without
Ray."""

import collections
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import nbdata as nd

ray = pytest.importorskip("ray")
from local_ray import local_ray  # noqa: E402,F401 - the module's Ray instance




def fused(ds):
    o = nd.Options()
    o.fusion_min_rows = 0
    return ds.with_options(o)


def rows(batches):
    """Every row of every batch, as a sorted list (order is not deterministic)."""
    return sorted(x for b in batches for x in np.asarray(b).reshape(-1).tolist())


def slow(x):
    """About 0.5 ms per element, in Python (format() keeps Numba and tracing out)."""
    time.sleep(0.0005)
    return np.int64(int(x) + len(format(0, ",")) - 1)


def consumer_chunks(it):
    """The distribute stage's chunk iterator under an iterator (to reach its job)."""
    return it._raw.it.it


# ---------------------------------------------------------------- both modes

def test_parallel_epochs_gives_every_element_once_per_worker():
    ds = fused(nd.Dataset.range(500).map(lambda x: x * 3).batch(7))
    expected = rows(ds)
    got = list(ds.distribute("parallel_epochs", num_workers=2))
    assert rows(got) == sorted(expected * 2)
    assert all(b.dtype == np.int64 for b in got)


def test_parallel_epochs_seeds_each_worker_differently():
    ds = nd.Dataset.range(64).shuffle(64, seed=5).batch(64)
    got = [b.tolist() for b in ds.distribute("parallel_epochs", num_workers=2)]
    assert len(got) == 2
    assert sorted(got[0]) == sorted(got[1]) == list(range(64))
    assert got[0] != got[1]


def test_distributed_epoch_runs_fused_kernels_on_workers_and_matches_in_process():
    x = np.arange(20_000, dtype=np.float32).reshape(-1, 2)
    y = np.arange(10_000, dtype=np.int64)
    ds = fused(nd.Dataset.from_tensor_slices((x, y))
               .map(lambda a, b: (a * 2.0, b))
               .filter(lambda a, b: b % 3 != 0)
               .batch(32))
    expected = sorted(int(v) for _, b in ds for v in b)
    dist = ds.distribute("distributed_epoch", num_workers=2)
    batches = list(dist)
    assert sorted(int(v) for _, b in batches for v in b) == expected
    for a, b in batches:
        np.testing.assert_array_equal(a, x[b] * np.float32(2.0))
    # Batches are read from Ray's object store in place (read-only views).
    assert not any(a.flags.writeable for a, _ in batches)
    stats = dist.compile().stats()
    stage = stats.stages[0]
    # Workers ask for splits as they get free: one that starts late (its process and
    # kernel compile on a loaded machine) may find the others took every split.
    assert stage.workers and set(stage.workers) <= {0, 1}
    assert stats.kernel_rows == 10_000          # every source row ran in a worker's kernel
    assert sum(w["rows"] for w in stage.workers.values()) == len(batches)
    text = dist.compile().explain()
    assert "driver and workers" in text and "split_source" in text
    for worker in stage.workers:
        assert f"worker {worker}:" in repr(stats)
    # A second iteration reuses the job and its workers: the same rows again.
    assert sorted(int(v) for _, b in dist for v in b) == expected


def test_distributed_epoch_splits_files(tmp_path):
    files = []
    for f in range(5):
        path = tmp_path / f"part{f}.txt"
        path.write_text("".join(f"{f}-{i}\n" for i in range(40)))
        files.append(str(path))
    ds = nd.TextLineDataset(files).map(lambda line: line + b"!")
    got = sorted(ds.distribute("distributed_epoch", num_workers=2))
    assert got == sorted(ds) and len(got) == 200


def test_service_distribute_transformation():
    ds = nd.Dataset.range(100).batch(10)
    out = ds.apply(nd.experimental.service.distribute("distributed_epoch", num_workers=2))
    assert rows(out) == list(range(100))


# -------------------------------------------------------- exactly once, restart

def test_killed_worker_loses_and_repeats_nothing():
    ds = nd.Dataset.range(3000).map(slow).batch(8)
    dist = ds.distribute("distributed_epoch", num_workers=2)
    it = iter(dist)
    got = [x for _ in range(25) for x in next(it).tolist()]
    job = consumer_chunks(it).job
    workers = ray.get(job.worker_handles.remote())
    ray.kill(workers[0], no_restart=True)
    got += [x for b in it for x in b.tolist()]
    counts = collections.Counter(got)
    assert [k for k, c in counts.items() if c > 1] == []
    assert sorted(got) == list(range(3000))
    assert ray.get(job.info.remote())["restarts"] == 1


def test_jobs_share_long_lived_worker_hosts_and_each_survives_a_killed_host():
    """Worker i of every job runs in the pool's host of slot i (one process serving
    many jobs); a killed host takes the workers of both running jobs, each restarts
    its own from its position, and the pool puts a new host in its place."""
    from nbdata.distribute import host
    # (Each worker has more rows than a job reads ahead: the kill finds both running.)
    a = iter(nd.Dataset.range(3000).map(slow).batch(8)
             .distribute("distributed_epoch", num_workers=2))
    b = iter(nd.Dataset.range(3000).map(slow).map(lambda x: x + 10_000).batch(8)
             .distribute("distributed_epoch", num_workers=2))
    got_a = [x for _ in range(5) for x in next(a).tolist()]
    got_b = [x for _ in range(5) for x in next(b).tolist()]
    job_a, job_b = consumer_chunks(a).job, consumer_chunks(b).job
    hosts_a = ray.get(job_a.worker_handles.remote())
    hosts_b = ray.get(job_b.worker_handles.remote())
    assert [h._actor_id for h in hosts_a] == [h._actor_id for h in hosts_b]
    keys = ray.get(hosts_a[0].hosted.remote())
    for job in (job_a, job_b):                  # both jobs' worker 0
        assert any(k.startswith(ray.get(job.info.remote())["id"] + "/0/") for k in keys)
    restarts = [ray.get(j.info.remote())["restarts"] for j in (job_a, job_b)]
    ray.kill(hosts_a[0], no_restart=True)
    got_a += [x for batch in a for x in batch.tolist()]
    got_b += [x for batch in b for x in batch.tolist()]
    assert sorted(got_a) == list(range(3000))
    assert sorted(got_b) == list(range(10_000, 13_000))
    assert [ray.get(j.info.remote())["restarts"] for j in (job_a, job_b)] == [
        r + 1 for r in restarts]
    now = ray.get(host.pool().hosts_now.remote())
    assert now[0]._actor_id != hosts_a[0]._actor_id
    assert now[1]._actor_id == hosts_a[1]._actor_id


@pytest.mark.parametrize("job_name", [None, "host-reap"])
def test_a_job_kept_idle_keeps_its_hosted_workers_and_one_that_ended_drops_them(job_name):
    """A job of its own lives in the pool of this process and ends with its dataset (or
    ``end``); a named job is an actor of its own: killed, the hosts find it gone."""
    it = iter(nd.Dataset.range(50).batch(10).distribute("distributed_epoch", num_workers=1,
                                                        job_name=job_name))
    assert rows(it) == list(range(50))
    job = consumer_chunks(it).job
    (hosted_on,) = ray.get(job.worker_handles.remote())
    prefix = ray.get(job.info.remote())["id"] + "/"

    def hosted():
        return [k for k in ray.get(hosted_on.hosted.remote()) if k.startswith(prefix)]
    assert len(hosted()) == 1
    ray.get(hosted_on.reap.remote())       # the job is idle, not gone: its worker stays
    assert len(hosted()) == 1
    if job_name is None:
        ray.get(job.end.remote())
    else:
        ray.kill(job, no_restart=True)
        # The kill takes effect asynchronously; the host finds the job gone at its next
        # check (every host.PING_S, or asked here).
        deadline = time.monotonic() + 60
        while hosted() and time.monotonic() < deadline:
            ray.get(hosted_on.reap.remote())
    assert hosted() == []


def test_consumer_restored_from_checkpoint_gets_the_rest_once(tmp_path):
    ds = nd.Dataset.range(2000).map(slow).batch(8)
    dist = ds.distribute("distributed_epoch", num_workers=2)
    it = iter(dist)
    first = [x for _ in range(30) for x in next(it).tolist()]
    element = next(it)                      # stop inside a chunk of several batches
    first += element.tolist()
    state = it.save()
    later = iter(dist)
    later.restore(state)
    rest = [x for b in later for x in b.tolist()]
    assert sorted(first + rest) == list(range(2000))
    assert len(first) + len(rest) == 2000
    path = str(tmp_path / "dist.ckpt")
    checkpoint = nd.Checkpoint(it=it)
    checkpoint.write(path)
    again = iter(dist)
    nd.Checkpoint(it=again).read(path)
    assert sorted(first + [x for b in again for x in b.tolist()]) == list(range(2000))


def test_a_saved_position_is_checked_before_it_is_used():
    """The consumer's position (each worker's state, the rows received) is part of the
    iterator's checksummed state: damaged copies are DataLossError and leave the running
    iterator as it was; it restores wherever the cluster is, on any num_workers."""
    import random

    ds = nd.Dataset.range(400).map(slow).batch(4)
    dist = ds.distribute("distributed_epoch", num_workers=2)
    it = iter(dist)
    first = [x for _ in range(10) for x in next(it).tolist()]
    state = it.save()
    rng = random.Random(2)
    for k in range(300):
        damaged = bytearray(state)
        if k % 3:
            damaged[rng.randrange(len(state))] ^= 1 << rng.randrange(8)
        else:
            damaged = damaged[:rng.randrange(len(state))]
        with pytest.raises(nd.errors.DataLossError):
            it.restore(bytes(damaged))
    ds.distribute("distributed_epoch", num_workers=3).compile().read_state(state)   # checked only
    rest = [x for b in it for x in b.tolist()]
    assert sorted(first + rest) == list(range(400))
    # another worker count (one worker: one process to start, not three)
    elsewhere = iter(ds.distribute("distributed_epoch", num_workers=1,
                                   address="ray://elsewhere:10001"))   # Ray is connected
    elsewhere.restore(state)
    assert sorted(first + [x for b in elsewhere for x in b.tolist()]) == list(range(400))


# ------------------------------------------------------------ shared jobs

def test_consumers_sharing_a_job_split_its_elements():
    ds = nd.Dataset.range(400).map(slow).batch(4)
    a = iter(ds.distribute("distributed_epoch", num_workers=2, job_name="shared-test"))
    b = iter(ds.distribute("distributed_epoch", num_workers=2, job_name="shared-test"))
    got_a, got_b = [], []
    done_a = done_b = False
    while not (done_a and done_b):
        for it, out, name in ((a, got_a, "a"), (b, got_b, "b")):
            if (name == "a" and done_a) or (name == "b" and done_b):
                continue
            try:
                out += next(it).tolist()
            except StopIteration:
                if name == "a":
                    done_a = True
                else:
                    done_b = True
    assert got_a and got_b
    assert sorted(got_a + got_b) == list(range(400))


def test_shared_job_rejects_another_dataset():
    first = iter(nd.Dataset.range(10).distribute("parallel_epochs", num_workers=1,
                                                 job_name="one-ds"))
    with pytest.raises(nd.errors.InvalidArgumentError, match="different dataset"):
        iter(nd.Dataset.range(10).map(lambda x: x + 1)
             .distribute("parallel_epochs", num_workers=1, job_name="one-ds"))
    assert sorted(int(x) for x in first) == list(range(10))


def test_coordinated_reads_take_each_round_from_one_worker():
    ds = nd.Dataset.range(1000).repeat()
    c0 = iter(ds.distribute("distributed_epoch", num_workers=2, job_name="coord",
                            consumer_index=0, num_consumers=2))
    c1 = iter(ds.distribute("distributed_epoch", num_workers=2, job_name="coord",
                            consumer_index=1, num_consumers=2))
    pairs = [(int(next(c0)), int(next(c1))) for _ in range(200)]
    # Each round's two elements are consecutive elements of one worker's stream (one
    # split), except where a split ends.
    consecutive = sum(b == a + 1 for a, b in pairs)
    assert consecutive >= 150
    assert len({v for p in pairs for v in p}) == 400


# -------------------------------------------------------------------- errors

@pytest.mark.parametrize("kwargs, match", [
    (dict(processing_mode="epochs"), "processing_mode"),
    (dict(processing_mode="parallel_epochs", consumer_index=0), "both `consumer_index`"),
    (dict(processing_mode="parallel_epochs", num_consumers=2), "both `consumer_index`"),
    (dict(processing_mode="parallel_epochs", consumer_index=0, num_consumers=2), "`job_name`"),
    (dict(processing_mode="parallel_epochs", job_name=""), "must not be empty"),
    (dict(processing_mode="parallel_epochs", job_name=3), "must be a string"),
    (dict(processing_mode="parallel_epochs", job_name="j", consumer_index=2, num_consumers=2),
     "consumer_index must be <"),
    (dict(processing_mode="parallel_epochs", num_workers=0), "num_workers must be >= 1"),
    (dict(processing_mode="parallel_epochs", job_name="j", consumer_index=0, num_consumers=2),
     "infinite dataset"),
])
def test_argument_errors_are_value_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        nd.Dataset.range(4).distribute(**kwargs)
    if "processing_mode" in kwargs and kwargs["processing_mode"] == "epochs":
        with pytest.raises(ValueError, match="processing_mode"):
            nd.experimental.service.distribute("epochs")


def test_unsplittable_datasets_name_the_op():
    gen = nd.Dataset.from_generator(lambda: iter([1, 2]), output_types=np.int64)
    with pytest.raises(nd.errors.UnimplementedError, match="from_generator"):
        gen.map(lambda x: x).distribute("distributed_epoch")
    zipped = nd.Dataset.zip((nd.Dataset.range(3), nd.Dataset.range(3)))
    with pytest.raises(nd.errors.UnimplementedError, match="zip"):
        zipped.distribute("distributed_epoch")
    # parallel_epochs runs datasets that cannot be split.
    assert sorted(int(x) for x in gen.distribute("parallel_epochs", num_workers=1)) == [1, 2]


def test_pipeline_errors_reach_the_consumer():
    def bad(x):
        if x == 7:
            raise ValueError("seven")
        return x
    ds = nd.Dataset.range(20).map(bad).distribute("distributed_epoch", num_workers=1)
    with pytest.raises(nd.errors.InvalidArgumentError, match="seven"):
        list(ds)


def test_without_ray_distribute_is_unavailable():
    code = textwrap.dedent("""
        import sys
        import nbdata as nd
        assert "ray" not in sys.modules, "import nbdata imported ray"
        sys.modules["ray"] = None
        try:
            nd.Dataset.range(3).distribute("parallel_epochs")
        except nd.errors.UnavailableError as e:
            assert "nbdata[distributed]" in str(e), e
            print("unavailable")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "unavailable", out.stderr


def test_a_new_ray_connection_gets_a_new_pool():
    """A process that shuts Ray down and connects again (its first job numbered as the
    last one's was) runs distributed pipelines on a new pool of worker hosts, not on the
    handle of the old cluster's pool."""
    from local_ray import start_ray

    from nbdata.distribute import host
    ds = fused(nd.Dataset.range(40).map(lambda x: x + 1).batch(8))
    assert rows(ds.distribute("parallel_epochs", num_workers=1)) == list(range(1, 41))
    before = host.pool()
    ray.shutdown()
    start_ray()
    assert host.pool() is not before
    assert rows(ds.distribute("parallel_epochs", num_workers=1)) == list(range(1, 41))
