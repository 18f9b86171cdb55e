"""The job: runs a distributed dataset's workers, hands out splits, brokers finished
chunks to consumers (first come, first served, or in coordinated rounds) and restarts
a dead worker from its position after its last finished chunk.

Nothing of a job is a process of its own unless it is named: a job without
``job_name`` is an object in the pool (the dispatcher) of the process that distributes,
called through a :class:`~nbdata.distribute.host.JobHandle`; a named job, which other
processes find by name, is a Ray actor of this class. Either way worker ``i`` of the
job runs in the host of slot ``i`` of that pool (see host.py), a long-lived process
that serves many jobs, so a job starts no process. The job numbers each worker's calls
(the host runs them in that order); a dead host's workers are restarted on the host
the pool puts in its place.

Chunks never pass through the job: a worker's reply is two Ray objects, the chunk and
a small note (rows, time, the worker's positions after the chunk, the splits it took);
the job waits on the note and hands the consumer the chunk's object reference, which
the consumer reads from Ray's object store.

A run starts from a saved position of the global stream (or from the beginning): the
positions in flight, which the job deals out among its workers whatever their number
(a worker given several runs all but the last only to drain them), and per epoch the
rows no position holds, which the job cuts into splits of its own size.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import functools
import uuid

from nbdata.distribute.splits import Pools, key_path, live_splits, plan_splits, shift_key
from nbdata.distribute.worker import fresh_position
from nbdata.errors import InternalError, InvalidArgumentError, UnavailableError

DEPTH = 2                 # requests in flight per worker
START_TIMEOUT_S = 120.0   # a worker that does not start in this time fails the job
ATTEMPTS = 3              # hosts tried for a worker whose host died before it started
END = ("end", None, None, None)


def deal_positions(positions: list | None, num_workers: int, splits: bool = True,
                   forever: bool = False, base: int = 0, workers: list | None = None) -> dict:
    """Worker index -> the positions it runs, in order.

    Without splits (parallel_epochs) worker ``i`` resumes the positions saved as worker
    ``i``'s (``workers``; none: it starts from the beginning). Else the
    positions holding something (a state or splits) are dealt out, position ``j`` to
    worker ``j % num_workers``, and every worker ends with a fresh position, which takes
    whatever rows are left (a resumed position whose ops saw their input end takes no
    more splits). Under a forever-repeat, where a position never ends, the
    ``num_workers`` positions of the oldest epochs go on taking splits (the rows an
    epoch has left are taken after them), the others before them only drain; the
    fresh positions start at epoch ``base``.

    >>> slots = deal_positions([{"state": 1}, {"state": None, "log": {}}, {"state": 3}], 2)
    >>> [[p["state"] for p in slots[i]] for i in range(2)]
    [[1, None], [3, None]]
    """
    if not splits:
        return {i: [dict(p, id=f"{i}.{j}") for j, p in
                    enumerate(workers[i] if workers is not None else [fresh_position()])]
                for i in range(num_workers)}
    held = [dict(p, drain=False) for p in positions or [] if p.get("state") is not None
            or p.get("log")]
    slots: dict = {i: [] for i in range(num_workers)}
    if not forever:
        for j, p in enumerate(held):
            slots[j % num_workers].append(p)
    else:
        held.sort(key=lambda p: _oldest_epoch(p))
        going, drained = held[:num_workers], held[num_workers:]
        for j, p in enumerate(drained):
            slots[j % num_workers].append(dict(p, drain=True))
        for i, p in enumerate(going):
            slots[i].append(p)
    for i, held_i in slots.items():
        held_i.append(fresh_position(base if forever else 0))
        for j, p in enumerate(held_i):
            p["id"] = f"{i}.{j}"
    return slots


def _oldest_epoch(position: dict) -> tuple:
    """The oldest epoch a position reads (positions that read none sort last)."""
    base = int(position.get("base") or 0)
    if position.get("state") is None:
        return (base,)
    live = live_splits(position["state"])
    return min((key_path(shift_key(k, base)) for k in live), default=(float("inf"),))


def prune_log(log: dict, kept: dict) -> None:
    """The job's copy of a worker's split log cut as the worker cut its own (``kept``,
    the log its last reply carried)."""
    if not kept:
        return
    oldest = min(key_path(k) for k in kept)
    for key in list(log):
        if key in kept:
            first, splits = log[key]
            drop = max(0, min(len(splits), int(kept[key][0]) - first))
            if drop:
                log[key] = [first + drop, splits[drop:]]
        elif key_path(key) < oldest:
            del log[key]


class _Run:
    """One pass of the job over its dataset (an iteration of its consumers)."""

    def __init__(self, run_id: int, config: dict, job_config: dict):
        num_workers = job_config["num_workers"]
        self.id = run_id
        self.uid = uuid.uuid4().hex
        self.seed = int(config["seed"])
        self.iteration = int(config["iteration"])
        self.num_consumers = config["num_consumers"]
        restore = config.get("restore")
        self.restored = None if restore is None else restore.get("id")
        self.stopped = False
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=2 * num_workers + 2)
        self.live = 0
        self.tasks: list = []
        positions = None if restore is None else restore["positions"]
        base = int(config.get("fresh_base") or 0) if restore is not None else 0
        rows = job_config.get("rows")
        # Each worker's positions after its last finished chunk (the first: as dealt).
        self.acked = deal_positions(positions, num_workers, rows is not None,
                                    bool(config.get("forever")), base,
                                    None if restore is None else restore.get("workers"))
        self.initial = copy.deepcopy(self.acked)
        self.pools = None if rows is None else Pools(rows, None if restore is None
                                                     else restore.get("pools"))
        self.split_size = job_config.get("split_size") or 1
        self.boundaries = job_config.get("boundaries")   # natural split points, or None
        self.pending: dict = {}
        # Per worker and position id, the position's split log with the splits given
        # since the worker's last finished chunk: a restarted worker replays them.
        self.logs = {i: {p["id"]: copy.deepcopy(p.get("log") or {}) for p in held}
                     for i, held in self.acked.items()}
        # Coordinated reads: each worker's elements by number, the rounds dealt so far
        # (round r: the (worker, element) of each consumer), and each consumer's round.
        self.items = {i: {} for i in range(num_workers)}
        self.produced = {i: 0 for i in range(num_workers)}
        self.ended = {i: False for i in range(num_workers)}
        self.rounds: dict = collections.defaultdict(int)
        self.plan: dict = {}
        self.plan_len = 0
        self.final = False
        self.next_k = {i: 0 for i in range(num_workers)}
        self.last_w = -1
        self.exhausted: set = set()
        # What a coordinated position is made of: each worker's positions and takes
        # after each element not yet read by every consumer, those before them folded
        # into ``base_positions`` / ``base_pools``, and the elements of each worker read
        # after each round.
        self.history = {i: {} for i in range(num_workers)}
        self.hist_start = {i: 0 for i in range(num_workers)}
        self.base_positions = copy.deepcopy(self.acked)
        self.base_pools = None if self.pools is None else Pools(rows, self.pools.save())
        self.after: dict = {}
        self.changed = asyncio.Condition()
        self.error = None


class Job:
    """The job (async: an actor, or an object of a pool's event loop). ``payload``: the
    plan's object reference and the pool; ``config``: ``fingerprint``, ``num_workers``,
    ``threads`` (per worker), ``rows`` (of the split source per epoch, or None in
    parallel_epochs) and ``split_size``; ``me``: the handle its workers call (None: the
    actor's own)."""

    def __init__(self, payload: list, config: dict, me=None, job_id: str | None = None):
        self.payload = payload[0]
        self.pool = payload[1]    # the worker hosts of the process that made the job
        self.config = config
        self.me = me              # the handle workers call (None: this actor's own)
        self.id = job_id or uuid.uuid4().hex
        self.generation = 0       # numbers the workers this job made (their host keys)
        self.workers: dict = {}   # worker index -> its _Slot
        self.spare: dict = {}     # workers of a larger count this job ran with before
        self.consumers: set = set()
        self.run: _Run | None = None
        self.runs = 0
        self.restarts = 0
        self.joining = asyncio.Lock()

    # ------------------------------------------------------------ workers
    async def _new_worker(self, host, index: int) -> "_Slot":
        """Worker ``index`` compiled on ``host``. Hosts reserve no CPUs: jobs kept idle
        between iterations (their workers keep the compiled pipeline) must not starve
        the next job; the worker's kernels take its share of the cores (``threads``)."""
        import ray
        # A weak handle: the job still ends when its consumers' handles go.
        me = self.me or ray.get_runtime_context().current_actor
        self.generation += 1
        key = f"{self.id}/{index}/{self.generation}"
        await host.create.remote(key, self.id, self.payload, index, me,
                                 self.config["threads"])
        return _Slot(host, key)

    async def _worker(self, index: int, dead: str | None = None) -> None:
        """Worker ``index`` on the host of slot ``index`` (a new host in place of the
        one with actor id ``dead``, or of one found dead now)."""
        from ray.exceptions import RayActorError
        for _ in range(ATTEMPTS):
            host = await self.pool.host.remote(index, dead)
            try:
                self.workers[index] = await self._new_worker(host, index)
                return
            except RayActorError as e:
                # The slot's host died (a job that saw it die may not have told the
                # pool yet): the pool makes another.
                dead, error = host._actor_id.hex(), e
        raise UnavailableError(f"distribute: no Ray worker host for worker {index} "
                               f"({error})", "distribute")

    async def _ensure_workers(self) -> None:
        for i in [i for i in self.spare if i < self.config["num_workers"]]:
            self.workers[i] = self.spare.pop(i)
        missing = [i for i in range(self.config["num_workers"]) if i not in self.workers]
        try:
            await asyncio.wait_for(asyncio.gather(*[self._worker(i) for i in missing]),
                                   START_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise UnavailableError(
                f"distribute: {len(missing)} Ray worker(s) did not start within "
                f"{START_TIMEOUT_S:.0f} s (does the cluster have free CPUs?)") from None

    def _configure(self, wanted: dict | None) -> None:
        """Between runs: take the worker count and split size the joining consumer's
        dataset asks for (a job kept idle, or named, may have run with others). Workers
        beyond the count are kept aside (with their compiled pipelines) for a later run
        on more workers."""
        if not wanted:
            return
        for key in ("num_workers", "rows", "split_size", "boundaries"):
            if key in wanted:
                self.config[key] = wanted[key]
        for i in [i for i in self.workers if i >= self.config["num_workers"]]:
            self.spare[i] = self.workers.pop(i)

    async def _restart(self, run: _Run, index: int) -> None:
        """A new worker in place of a dead one (its host died), resumed from its
        positions after the last chunk the dead one finished, replaying the splits it
        took after that."""
        old = self.workers.pop(index, None)
        self.restarts += 1
        await self._worker(index, None if old is None else old.host._actor_id.hex())
        await self._ensure_workers()
        await self._start(run, index)

    async def _start(self, run: _Run, index: int) -> None:
        """Worker ``index`` opens ``run`` from its positions after its last finished
        chunk (its last position with every split the job gave it); restarted first
        when its host died since its last run (a job kept idle)."""
        from ray.exceptions import RayActorError
        positions = copy.deepcopy(run.acked[index])
        if run.pools is not None:
            for p in positions:
                if p.get("id") in run.logs[index]:
                    p["log"] = copy.deepcopy(run.logs[index][p["id"]])
        try:
            await self.workers[index].call("start", run.id, run.seed, run.iteration,
                                           positions, run.num_consumers is not None)
        except RayActorError:
            await self._restart(run, index)

    # ---------------------------------------------------------- consumers
    async def join(self, consumer: str, fingerprint: str, config: dict) -> dict:
        """Register a consumer; the first one of a run starts it with ``config``
        (``seed``, ``iteration``, ``num_consumers``, the saved position to resume from,
        ``restore``, with ``fresh_base`` and ``resplit``, and the ``job`` settings its
        dataset asks for). Returns the run's id and each worker's first positions."""
        async with self.joining:
            return await self._join(consumer, fingerprint, config)

    async def check(self, fingerprint: str, num_consumers: int | None) -> None:
        """InvalidArgumentError when a consumer of another dataset, or of a running job
        read with another ``num_consumers``, would join."""
        name = self.config.get("job_name")
        if fingerprint != self.config["fingerprint"]:
            raise InvalidArgumentError(
                f"distribute: job {name!r} already runs a different "
                f"dataset (plan fingerprint {self.config['fingerprint']}, this one's is "
                f"{fingerprint}); use another job_name for another dataset")
        if self.run is not None and num_consumers != self.run.num_consumers:
            raise InvalidArgumentError(
                f"distribute: job {name!r} is read with "
                f"num_consumers={self.run.num_consumers}, got {num_consumers}")

    async def _join(self, consumer: str, fingerprint: str, config: dict) -> dict:
        name = self.config.get("job_name")
        await self.check(fingerprint, config["num_consumers"])
        restore = config.get("restore")
        run = self.run
        if run is not None:
            if restore is not None and restore.get("id") != run.restored:
                raise InvalidArgumentError(
                    f"restore: job {name!r} is running from another position than the "
                    "one restored here; restore every consumer of a job from states saved "
                    "after the same number of elements, once its earlier consumers are "
                    "closed", "distribute")
            self.consumers.add(consumer)
            return {"run": run.id, "slots": run.initial, "num_workers": len(run.acked)}
        self._configure(config.get("job"))
        workers = self.config["num_workers"]
        saved = None if restore is None else restore.get("workers")
        if restore is not None and self.config.get("rows") is None and (
                saved is None or len(saved) != workers):
            message, op = config.get("resplit") or ("", "distribute")
            count = len(saved or ())
            raise InvalidArgumentError(
                f"restore: the state of distribute holds the positions of {count} workers "
                f"and this job has {workers}: {message}; restore with num_workers={count}", op)
        self.consumers.add(consumer)
        await self._ensure_workers()
        self.runs += 1
        run = self.run = _Run(self.runs, config, self.config)
        await asyncio.gather(*[self._start(run, i) for i in self.workers])
        run.live = len(self.workers)
        run.tasks = [asyncio.ensure_future(self._produce(run, i)) for i in self.workers]
        return {"run": run.id, "slots": run.initial, "num_workers": workers}

    async def leave(self, consumer: str) -> None:
        """Unregister a consumer; the last one stops the run (workers close theirs)."""
        self.consumers.discard(consumer)
        if self.consumers or self.run is None:
            return
        run, self.run = self.run, None
        run.stopped = True
        for task in run.tasks:
            task.cancel()
        for w in self.workers.values():
            w.call("close")
        # Wake the requests still waiting on the run (a consumer asks one chunk ahead).
        while not run.queue.empty():
            run.queue.get_nowait()
        run.queue.put_nowait(END)
        async with run.changed:
            run.changed.notify_all()

    async def next(self, consumer: str, index: int | None):
        """The next chunk for a consumer: ("chunk", worker, [chunk ref], note),
        ("error", worker, None, note) or ("end", ...)."""
        run = self.run
        if run is None:
            return END
        if run.num_consumers is None:
            item = await run.queue.get()
            if item[0] == "end":
                run.queue.put_nowait(item)  # for the other consumers
            return item
        return await self._coordinated(run, int(index))

    # -------------------------------------------------- coordinated reads
    async def _coordinated(self, run: _Run, index: int):
        """Round ``r`` of every consumer comes from one worker, ``num_consumers``
        consecutive elements of it (worker ``r % num_workers`` while every worker has
        elements). A worker that ends with fewer than a round left is passed over;
        once all have ended, their last elements are dealt out one per consumer, so
        every element of a finite dataset is read once (the last round may leave some
        consumers one element short)."""
        async with run.changed:
            while True:
                if run.error is not None:
                    return run.error
                if run.stopped:
                    return END
                r = run.rounds[index]
                if r < run.plan_len:
                    dealt = run.plan[r]
                    if index >= len(dealt):
                        return END
                    w, k = dealt[index]
                    item = run.items[w].pop(k)
                    run.rounds[index] = r + 1
                    self._fold(run)
                    run.changed.notify_all()
                    return item
                if run.final:
                    return END
                if not self._deal(run):
                    await run.changed.wait()

    def _deal(self, run: _Run) -> bool:
        """Deal the next round if the workers allow it yet (False: wait for one)."""
        workers, consumers = len(run.produced), run.num_consumers
        for step in range(workers):
            w = (run.last_w + 1 + step) % workers
            if w in run.exhausted:
                continue
            need = run.next_k[w] + consumers
            if run.produced[w] >= need:
                self._add_round(run, [(w, run.next_k[w] + c) for c in range(consumers)])
                run.next_k[w], run.last_w = need, w
                return True
            if not run.ended[w]:
                return False
            run.exhausted.add(w)
        rest = [(w, k) for w in range(workers) for k in range(run.next_k[w], run.produced[w])]
        for i in range(0, len(rest), consumers):
            self._add_round(run, rest[i:i + consumers])
        run.final = True
        return True

    @staticmethod
    def _add_round(run: _Run, dealt: list) -> None:
        after = dict(run.after[run.plan_len - 1]) if run.plan_len else {w: 0 for w in run.produced}
        for w, k in dealt:
            after[w] = max(after[w], k + 1)
        run.plan[run.plan_len] = dealt
        run.after[run.plan_len] = after
        run.plan_len += 1

    def _read_after(self, run: _Run, rounds: int) -> dict:
        """Per worker, how many of its elements the first ``rounds`` rounds read."""
        if rounds <= 0:
            return {w: 0 for w in run.produced}
        found = run.after.get(rounds - 1)
        if found is None:
            raise InternalError(f"distribute: round {rounds} is no longer recorded by the job",
                                "distribute")
        return found

    def _fold(self, run: _Run) -> None:
        """Forget what no consumer can save a position before any more: the rounds and
        elements before the slowest consumer's last one."""
        oldest = min(run.rounds.get(c, 0) for c in range(run.num_consumers)) - 1
        if oldest <= 0:
            return
        reads = self._read_after(run, oldest)
        for w, upto in reads.items():
            hist = run.history[w]
            for k in range(run.hist_start[w], upto):
                positions, taken = hist.pop(k)
                run.base_positions[w] = positions
                if run.base_pools is not None:
                    for key, split in taken:
                        run.base_pools.assign(key, split)
            run.hist_start[w] = max(run.hist_start[w], upto)
        for r in [r for r in run.after if r < oldest - 1]:
            del run.after[r]
            run.plan.pop(r, None)

    async def position(self, run_id: int, rounds: int) -> dict:
        """The global position after ``rounds`` rounds of coordinated reads (every
        consumer having read that many elements): the positions in flight of every
        worker after the elements those rounds read, and the rows of each epoch no
        position holds. The same for every consumer that saves after as many elements,
        whatever its index; ``id`` names it."""
        run = self.run
        if run is None or run.id != run_id:
            raise InvalidArgumentError("save: the job's run this iterator read has ended; "
                                       "save a running iterator", "distribute")
        async with run.changed:
            reads = self._read_after(run, int(rounds))
            pools = None if run.base_pools is None else Pools(run.base_pools.rows,
                                                              run.base_pools.save())
            positions, workers = [], []
            for w in sorted(run.produced):
                start, upto = run.hist_start[w], reads[w]
                if upto < start:
                    raise InternalError("distribute: a position before the slowest "
                                        "consumer's is no longer recorded", "distribute")
                held = run.base_positions[w] if upto == start else run.history[w][upto - 1][0]
                positions += copy.deepcopy(held)
                workers.append(copy.deepcopy(held))
                if pools is not None:
                    for k in range(start, upto):
                        for key, split in run.history[w][k][1]:
                            pools.assign(key, split)
            return {"positions": positions, "workers": workers,
                    "pools": None if pools is None else pools.save(),
                    "id": f"{run.uid}/{int(rounds)}"}

    # ------------------------------------------------------------ producing
    async def _produce(self, run: _Run, index: int) -> None:
        from ray.exceptions import RayActorError
        inflight: collections.deque = collections.deque()
        try:
            while not run.stopped:
                worker = self.workers[index]
                while len(inflight) < DEPTH:
                    inflight.append(worker.call("next", run.id, returns=2))
                chunk_ref, note_ref = inflight.popleft()
                try:
                    note = await note_ref
                except RayActorError:
                    inflight.clear()
                    await self._restart(run, index)
                    continue
                except Exception as e:  # noqa: BLE001 - the consumer raises it
                    note = {"end": True, "error": e}
                if note.get("stale"):
                    continue
                if "error" in note:
                    await self._deliver(run, index, ("error", index, None, note))
                    break
                if note["end"]:
                    break
                run.acked[index] = note["state"]
                if run.pools is not None:
                    logs = run.logs[index]
                    ids = {p.get("id"): p for p in note["state"]}
                    for pid in [pid for pid in logs if pid not in ids]:
                        del logs[pid]       # a position that ended
                    for pid, p in ids.items():
                        if pid in logs:
                            prune_log(logs[pid], p.get("log") or {})
                await self._deliver(run, index, ("chunk", index, [chunk_ref], note))
        except asyncio.CancelledError:
            return
        await self._finish(run, index)

    async def _deliver(self, run: _Run, index: int, item) -> None:
        if run.num_consumers is None:
            await run.queue.put(item)
            return
        async with run.changed:
            if item[0] == "error":
                run.error = item
            else:
                while len(run.items[index]) >= 2 * run.num_consumers and not run.stopped:
                    await run.changed.wait()
                note = item[3]
                k = run.produced[index]
                run.history[index][k] = (note.pop("state"), note.pop("taken"))
                run.items[index][k] = item
                run.produced[index] = k + 1
            run.changed.notify_all()

    async def _finish(self, run: _Run, index: int) -> None:
        run.live -= 1
        if run.num_consumers is None:
            if run.live == 0:
                await run.queue.put(END)
            return
        async with run.changed:
            run.ended[index] = True
            run.changed.notify_all()

    # --------------------------------------------------------------- splits
    async def take_split(self, index: int, key: str, k: int, run_id: int, position: str):
        """The next split of epoch ``key`` for worker ``index`` (the ``k``-th take of that
        epoch by its position ``position``): a piece of the epoch's rows no position
        holds, or None once there are none; logged as that position's. A worker still finishing a chunk of an earlier
        run gets None: a split given to it would be logged in this run but lost with
        that chunk."""
        run = self.run
        if run is None or run.id != run_id or run.pools is None:
            return None
        pending = run.pending.get(key)
        if pending is None:
            pending = run.pending[key] = collections.deque(
                plan_splits(run.pools.ranges(key), run.split_size, run.boundaries))
        if not pending:
            return None
        split = pending.popleft()
        log = run.logs[index].setdefault(position, {})
        log.setdefault(key, [int(k), []])[1].append(list(split))
        return split

    # -------------------------------------------------------------- reports
    async def worker_handles(self) -> list:
        """The host of each worker (killing one kills the workers of every job on it)."""
        await self._ensure_workers()
        return [self.workers[i].host for i in sorted(self.workers)]

    async def alive(self) -> bool:
        """For hosts: a job that no longer answers has its workers dropped."""
        return True

    async def end(self) -> None:
        """The job ends (a job hosted by a pool, its owner's handle gone): its run
        stops and its hosts drop its workers."""
        self.consumers.clear()
        await self.leave(None)
        # Awaited: when end() returns, no host holds a worker of the job (the drops are
        # calls of this actor, which the caller's next calls to a host need not follow).
        for dropped in self._drop_workers():
            try:
                await dropped
            except Exception:  # noqa: BLE001 - a host that died has dropped them too
                pass

    def _drop_workers(self) -> list:
        """Tells the job's hosts to drop its workers; the calls' refs."""
        refs = []
        for host in {id(s.host): s.host for s in (*self.workers.values(),
                                                  *self.spare.values())}.values():
            try:
                refs.append(host.drop.remote([self.id + "/"]))
            except Exception:  # noqa: BLE001 - Ray going down
                pass
        self.workers.clear()
        self.spare.clear()
        return refs

    def __ray_shutdown__(self) -> None:
        # A job actor ends (its last handle went): its hosts drop its workers now (else
        # within host.PING_S).
        self._drop_workers()

    async def info(self) -> dict:
        return {"id": self.id, "workers": len(self.workers), "restarts": self.restarts,
                "runs": self.runs, "consumers": len(self.consumers),
                "num_workers": self.config["num_workers"]}


class _Slot:
    """A worker of this job on a host: its calls, numbered in the order the job makes
    them (the host runs them in that order)."""

    def __init__(self, host, key: str):
        self.host, self.key, self.seq = host, key, 0

    def call(self, method: str, *args, returns: int = 1):
        seq, self.seq = self.seq, self.seq + 1
        return self.host.call.options(num_returns=returns).remote(self.key, seq, method,
                                                                 *args)


@functools.lru_cache(maxsize=None)
def job_class():
    """The Ray actor class of :class:`Job`."""
    from nbdata.distribute.cluster import ray_module
    return ray_module().remote(num_cpus=0, max_concurrency=1000)(Job)
