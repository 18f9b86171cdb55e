"""The executor's context: run state that outlives one iteration, and what iterators need
while they run (placeholder values, resources, statistics, opening other plans)."""

from __future__ import annotations

import threading
from typing import Any, Callable

from nbdata.errors import FailedPreconditionError
from nbdata.options import Options
from nbdata.placeholder import Placeholder


class RunState:
    """The mutable side of a dataset, kept out of its immutable plan.

    Holds the resources of stateful nodes, keyed by the node's ``resource_key``:
    a shuffle's epoch counter (each iteration reshuffles), a memory cache's store
    (filled by one complete iteration, read by later ones). A dataset and the
    datasets derived from it share one RunState, as tf.data's resources are shared
    by every dataset built on the op that made them; ``merged`` gives datasets that
    combine others (zip, concatenate) a view of each input's resources.
    """

    def __init__(self, parents: tuple["RunState", ...] = ()):
        self._resources: dict[int, Any] = {}
        self._parents = parents
        self._lock = threading.Lock()

    @classmethod
    def merged(cls, *states: "RunState") -> "RunState":
        distinct = []
        for s in states:
            if all(s is not d for d in distinct):
                distinct.append(s)
        return distinct[0] if len(distinct) == 1 else cls(tuple(distinct))

    def register(self, key: int, resource: Any) -> None:
        with self._lock:
            self._resources[key] = resource

    def _find(self, key: int) -> Any:
        if key in self._resources:
            return self._resources[key]
        for parent in self._parents:
            found = parent._find(key)
            if found is not None:
                return found
        return None

    def resource(self, key: int, factory: Callable[[], Any]) -> Any:
        """The resource registered under ``key`` (made by ``factory`` if none was)."""
        with self._lock:
            found = self._find(key)
            if found is None:
                found = self._resources[key] = factory()
            return found


class StageStats:
    """Counters of one fused stage, summed over every iteration of its pipeline:
    chunks and rows that ran in the compiled kernel, and chunks and rows that were
    re-run on the reference path (a row whose function raised inside the kernel or
    whose value did not fit its column), with the first reasons."""

    MAX_REASONS = 5

    def __init__(self, title: str):
        self.title = title
        self.kernel_chunks = 0
        self.kernel_rows = 0
        self.fallback_chunks = 0
        self.fallback_rows = 0
        self.fallback_reasons: list[str] = []
        self._lock = threading.Lock()

    def kernel(self, rows: int) -> None:
        with self._lock:
            self.kernel_chunks += 1
            self.kernel_rows += rows

    def fallback(self, rows: int, reason: str) -> None:
        with self._lock:
            self.fallback_chunks += 1
            self.fallback_rows += rows
            if len(self.fallback_reasons) < self.MAX_REASONS:
                self.fallback_reasons.append(reason)

    def line(self) -> str:
        text = (f"{self.title}: {self.kernel_rows:,} rows in {self.kernel_chunks:,} kernel "
                f"chunks; {self.fallback_rows:,} rows in {self.fallback_chunks:,} chunks re-run "
                f"on the reference path")
        if self.fallback_reasons:
            text += " (" + "; ".join(self.fallback_reasons) + ")"
        return text


class ExecContext:
    """What iterators need while they run.

    ``value(x)`` resolves placeholders from the feed; ``resource(key, factory)`` gives
    a stateful node its run-state resource; ``stats(stage)`` the stage's counters;
    ``open(node)`` opens a node's iterator; ``open_dataset(ds)`` compiles and opens
    a dataset made while running (by ``flat_map``, ``interleave``), with its own
    options and passes and this context's feed; ``make_dataset(node)`` wraps a plan
    made while running (a window) as a user-facing dataset.
    """

    def __init__(self, options: Options, feed: dict | None = None, state: RunState | None = None,
                 stats: dict | None = None, make_dataset: Callable | None = None):
        self.options = options
        self.feed = feed or {}
        self.state = state if state is not None else RunState()
        self._stats = stats if stats is not None else {}
        self._make_dataset = make_dataset

    def value(self, x: Any) -> Any:
        if isinstance(x, Placeholder):
            if x not in self.feed:
                raise FailedPreconditionError(
                    f"placeholder {x.name!r} has no value: initialize the iterator with "
                    f"feed_dict={{{x.name}: ...}}")
            return self.feed[x]
        return x

    def resource(self, key: int, factory: Callable[[], Any]) -> Any:
        return self.state.resource(key, factory)

    def stats(self, stage) -> StageStats:
        found = self._stats.get(id(stage))
        if found is None:
            found = self._stats.setdefault(id(stage), StageStats(stage.title()))
        return found

    def open(self, node) -> Any:
        return node.open(self)

    def open_dataset(self, ds) -> Any:
        return ds.compile().open_in(self)

    def make_dataset(self, node) -> Any:
        if self._make_dataset is None:
            raise FailedPreconditionError("this pipeline cannot make datasets at run time")
        return self._make_dataset(node)
