"""Progress of long work.

:class:`Progress`: command-line work (``python -m nbdata inspect`` of a large file,
``fuzz``) and the epochs of a pipeline with ``Options().progress``: a ``tqdm`` bar
when tqdm is installed, else one line on stderr rewritten at most twice a second.
Command-line work shows it when stderr is a terminal, or when ``NBDATA_PROGRESS=1``;
``NBDATA_PROGRESS=0`` hides every bar.

:func:`working`: work that is usually quick but may take long (compiling a pipeline)
says what it is doing once it has taken :data:`SLOW_SECONDS`, then each step it moves
on to and when it is done: through the ``nbdata`` logger (INFO) when it is set to show
INFO, else as lines on stderr (unless ``NBDATA_PROGRESS=0``).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

logger = logging.getLogger("nbdata")

SLOW_SECONDS = 1.0   # work that takes longer says what it is doing


def _enabled() -> bool:
    setting = os.environ.get("NBDATA_PROGRESS", "")
    if setting in ("0", "1"):
        return setting == "1"
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


class Progress:
    """``update(n)`` as work is done, ``close()`` at the end (or use it as a context
    manager). ``total`` None: a count without an end. ``asked``: the user asked for it
    (``Options().progress``): shown unless ``NBDATA_PROGRESS=0``."""

    def __init__(self, desc: str, total: int | None = None, unit: str = "it",
                 asked: bool = False):
        self.desc, self.total, self.unit = desc, total, unit
        self.n = 0
        self.bar = None
        self.enabled = (os.environ.get("NBDATA_PROGRESS") != "0") if asked else _enabled()
        self.last = 0.0
        self.start = time.perf_counter()
        if not self.enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self.bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, mininterval=0.5,
                        unit_scale=True)

    def update(self, n: int = 1) -> None:
        self.n += n
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(n)
            return
        now = time.perf_counter()
        if now - self.last >= 0.5:
            self.last = now
            self._line(now)

    def _line(self, now: float, end: str = "") -> None:
        rate = self.n / max(now - self.start, 1e-9)
        of = f"/{self.total:,}" if self.total else ""
        sys.stderr.write(f"\r{self.desc}: {self.n:,}{of} {self.unit} ({rate:,.0f} {self.unit}/s)"
                         + end)
        sys.stderr.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            self._line(time.perf_counter(), "\n")
        self.enabled = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def say(message: str) -> None:
    """One line about long work: to the ``nbdata`` logger when it shows INFO, else on
    stderr (unless ``NBDATA_PROGRESS=0``)."""
    if logger.isEnabledFor(logging.INFO) and logger.hasHandlers():
        logger.info(message)
    elif os.environ.get("NBDATA_PROGRESS") != "0":
        sys.stderr.write(f"nbdata: {message}\n")
        sys.stderr.flush()


_local = threading.local()


class SlowWork:
    """Work that says what it does (``what``, and the step it is at: :func:`step`)
    once it has taken ``after`` seconds (default :data:`SLOW_SECONDS`), each step after
    that, and how long it took in all; quick work says nothing."""

    def __init__(self, what: str, after: float | None = None):
        self.what = what
        self.after = SLOW_SECONDS if after is None else after
        self.now: str | None = None
        self.told = False
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None
        self.started = 0.0

    def __enter__(self) -> "SlowWork":
        self.outer = getattr(_local, "work", None)
        _local.work = self
        self.started = time.perf_counter()
        if self.after <= 0:
            self._tell()
        else:
            self.timer = threading.Timer(self.after, self._tell)
            self.timer.daemon = True
            self.timer.start()
        return self

    def _elapsed(self) -> float:
        return time.perf_counter() - self.started

    def _tell(self) -> None:
        with self.lock:
            self.told = True
            now = self.now
        say(f"{self.what}" + (f": {now}" if now else "") +
            f" ({self._elapsed():.1f} s so far)")

    def step(self, now: str) -> None:
        with self.lock:
            same, self.now = self.now == now, now
            told = self.told
        if told and not same:
            say(f"{self.what}: {now}")

    def __exit__(self, *exc) -> None:
        _local.work = self.outer
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join()
        if self.told:
            say(f"{self.what}: {'done' if exc[0] is None else 'failed'} after "
                f"{self._elapsed():.1f} s")


class _Step:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


def step(now: str) -> None:
    """Tells the slow work this thread is doing (if any) which step it is at."""
    work = getattr(_local, "work", None)
    if work is not None:
        work.step(now)


def working(what: str, after: float | None = None):
    """A context manager for work that may take long: a step of the slow work this
    thread is doing already, else a :class:`SlowWork` of its own."""
    if getattr(_local, "work", None) is not None:
        step(what)
        return _Step()
    return SlowWork(what, after)
