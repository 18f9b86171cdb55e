"""What a pipeline's stages and threads did, as a trace you can look at.

While a trace records (``with pipe.profile("trace.json"):``, ``Options().profile``, or
``python -m nbdata profile script.py``), every stage's chunks, the kernel runs of fused
stages, record decoders' runs (``decode``: JPEG, Example parsing, CSV), the rows re-run
on the reference path (Python), the time a consumer waited on
a background producer (``prefetch``, parallel maps), and copies to the GPU are
recorded with the thread that did them. The file is Chrome's trace-event format (JSON):
Perfetto (ui.perfetto.dev, "Open trace file") and chrome://tracing open it; each
thread is a track, a stage's chunk is a slice nested in the slice of the stage that
asked for it, and a wait is a slice named ``wait for <stage>`` on the consumer's track.

Recording costs one clock read and one list append per chunk (not per element); when
nothing records, one module global is read per chunk.

>>> import nbdata as nd, json, os, tempfile
>>> o = nd.Options(); o.fusion_min_rows = 0
>>> pipe = nd.Dataset.range(100).map(lambda x: x * 2).batch(10).with_options(o).compile()
>>> path = os.path.join(tempfile.mkdtemp(), "trace.json")
>>> with pipe.profile(path):
...     _ = list(pipe)
>>> events = json.load(open(path))["traceEvents"]
>>> sorted({e["cat"] for e in events if e["ph"] == "X"})
['kernel', 'stage']
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from typing import Any, Iterator

_current: "Trace | None" = None
_lock = threading.Lock()


class Trace:
    """Events recorded in one process (times from ``time.perf_counter``)."""

    def __init__(self, path: str | None = None):
        self.path = path
        self.start = time.perf_counter()
        self.pid = os.getpid()
        self.events: list[dict] = []
        self.threads: dict[int, str] = {}
        self.lock = threading.Lock()

    def complete(self, name: str, cat: str, begin: float, end: float,
                 args: dict | None = None) -> None:
        """A slice ``[begin, end]`` (``perf_counter`` seconds) on the calling thread."""
        tid = threading.get_ident()
        event = {"name": name, "cat": cat, "ph": "X", "pid": self.pid, "tid": tid,
                 "ts": round((begin - self.start) * 1e6, 3),
                 "dur": round(max(0.0, end - begin) * 1e6, 3)}
        if args:
            event["args"] = args
        with self.lock:
            if tid not in self.threads:
                self.threads[tid] = threading.current_thread().name
            self.events.append(event)

    @contextlib.contextmanager
    def span(self, name: str, cat: str, **args: Any) -> Iterator[None]:
        begin = time.perf_counter()
        try:
            yield
        finally:
            self.complete(name, cat, begin, time.perf_counter(), args or None)

    def as_json(self) -> dict:
        """The trace-event JSON object: the slices, then the process and thread names."""
        with self.lock:
            events = list(self.events)
            threads = dict(self.threads)
        meta = [{"name": "process_name", "ph": "M", "pid": self.pid, "tid": 0,
                 "args": {"name": "nbdata"}}]
        meta += [{"name": "thread_name", "ph": "M", "pid": self.pid, "tid": tid,
                  "args": {"name": name}} for tid, name in threads.items()]
        return {"traceEvents": events + meta, "displayTimeUnit": "ms",
                "otherData": {"producer": "nbdata"}}

    def write(self, path: str | None = None) -> str:
        """Writes the trace (to ``path``, else the path it was made with); the path."""
        path = path or self.path
        if not path:
            raise ValueError("the trace has no path to write to")
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.as_json(), f)
        os.replace(tmp, path)
        return path

    def waits(self) -> float:
        """Seconds consumers spent waiting for background producers."""
        with self.lock:
            return sum(e["dur"] for e in self.events if e["cat"] == "wait") / 1e6


def current() -> Trace | None:
    """The trace recording now, if any."""
    return _current


def start(path: str | None = None) -> Trace:
    """Starts recording (process-wide); an already recording trace goes on."""
    global _current
    with _lock:
        if _current is None:
            _current = Trace(path)
        return _current


def stop() -> Trace | None:
    """Stops recording and writes the trace to its path (when it has one)."""
    global _current
    with _lock:
        trace, _current = _current, None
    if trace is not None and trace.path:
        trace.write()
    return trace


@contextlib.contextmanager
def profile(path: str | None = None) -> Iterator[Trace]:
    """Records what every pipeline of the process does while the block runs, then writes
    the trace to ``path`` (Chrome trace-event JSON). Within a recording already going on
    (``python -m nbdata profile``), the block's events go to that one, and ``path``
    gets a copy of it at the end of the block."""
    global _current
    with _lock:
        outer = _current
        if outer is None:
            _current = Trace(path)
        trace = _current
    try:
        yield trace
    finally:
        if outer is None:
            with _lock:
                _current = None
        if path:
            trace.write(path)


_exit_paths: set = set()


def record_to(path: str) -> Trace:
    """``Options().profile``: records from now on (joining a recording going on) and
    writes the trace to ``path`` at exit (and whenever :func:`save_to` is called)."""
    trace = start(str(path))
    with _lock:
        if not _exit_paths:
            import atexit
            atexit.register(_write_at_exit)
        _exit_paths.add(str(path))
    return trace


def save_to(path: str) -> None:
    """Writes the trace recording now to ``path`` (an iteration of a pipeline with
    ``Options().profile`` ended)."""
    trace = _current
    if trace is not None:
        trace.write(str(path))


def _write_at_exit() -> None:
    trace = _current
    if trace is not None:
        for path in sorted(_exit_paths):
            try:
                trace.write(path)
            except OSError:
                pass


def slice_(name: str, cat: str, begin: float, end: float, args: dict | None = None) -> None:
    """Records a slice when a trace is recording (the hooks' one call)."""
    trace = _current
    if trace is not None:
        trace.complete(name, cat, begin, end, args)


__all__ = ["Trace", "current", "profile", "record_to", "save_to", "start", "stop"]
