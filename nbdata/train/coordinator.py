"""``nd.train.Coordinator``: stopping a set of threads together and reporting the first
exception one of them raised (``tf.train.Coordinator``)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time

from nbdata.errors import OutOfRangeError


class Coordinator:
    """Coordinates the termination of threads.

    ``request_stop(ex)`` asks every thread to stop (``should_stop()`` becomes True) and
    records the first exception reported; ``join`` waits for the threads and raises
    that exception. Exceptions of ``clean_stop_exception_types`` (OutOfRangeError by
    default: an input ended) stop the threads without being re-raised.

    >>> import threading, nbdata as nd
    >>> coord = nd.train.Coordinator()
    >>> def work():
    ...     with coord.stop_on_exception():
    ...         raise ValueError("bad input")
    >>> t = threading.Thread(target=work); t.start()
    >>> try:
    ...     coord.join([t])
    ... except ValueError as e:
    ...     print("join raised:", e)
    join raised: bad input
    """

    def __init__(self, clean_stop_exception_types=None):
        types = clean_stop_exception_types
        self._clean_stop_exception_types = tuple((OutOfRangeError,) if types is None else types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info_to_raise = None
        self._joined = False
        self._registered_threads: set = set()

    def _filter_exception(self, ex):
        """The exception info to record for ``ex`` (None for clean stops)."""
        instance = ex[1] if isinstance(ex, tuple) else ex
        if instance is None or isinstance(instance, self._clean_stop_exception_types):
            return None
        return ex if isinstance(ex, tuple) else (type(ex), ex, ex.__traceback__)

    def request_stop(self, ex=None) -> None:
        """Ask the threads to stop. ``ex`` (an exception or an ``exc_info`` tuple) is
        recorded for ``join`` when it is the first stop request and not a clean-stop
        type; after ``join`` it is raised at once (nothing would report it)."""
        with self._lock:
            info = self._filter_exception(ex)
            if self._joined and info is not None:
                raise info[1].with_traceback(info[2])
            if not self._stop_event.is_set():
                if info is not None and self._exc_info_to_raise is None:
                    self._exc_info_to_raise = info
                self._stop_event.set()

    def clear_stop(self) -> None:
        """Clear the stop request (and the recorded exception): the coordinator can be
        used again."""
        with self._lock:
            self._joined = False
            self._exc_info_to_raise = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        """Whether a stop was requested."""
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self):
        """A context manager reporting an exception raised inside to ``request_stop``."""
        try:
            yield
        except BaseException:  # noqa: BLE001 - every exception is reported
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Wait until a stop is requested (at most ``timeout`` seconds); returns whether
        it was."""
        return self._stop_event.wait(timeout)

    def register_thread(self, thread: threading.Thread) -> None:
        """Have ``join`` wait for ``thread`` too."""
        with self._lock:
            self._registered_threads.add(thread)

    def join(self, threads=None, stop_grace_period_secs: float = 120,
             ignore_live_threads: bool = False) -> None:
        """Wait for the threads (``threads`` and those registered) to end.

        Waits until they all end or a stop is requested; then gives the rest
        ``stop_grace_period_secs`` to end. Re-raises the exception passed to
        ``request_stop``, if any; otherwise, threads still alive raise RuntimeError
        naming them (unless ``ignore_live_threads``).
        """
        with self._lock:
            threads = set(threads or ()) | self._registered_threads
        while any(t.is_alive() for t in threads) and not self.wait_for_stop(1.0):
            pass
        deadline = time.monotonic() + stop_grace_period_secs
        for t in threads:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            t.join(left)
        stragglers = [t.name for t in threads if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered_threads = set()
            if self._exc_info_to_raise is not None:
                _, value, tb = self._exc_info_to_raise
                raise value.with_traceback(tb)
            if stragglers and not ignore_live_threads:
                raise RuntimeError("Coordinator stopped with threads still running: "
                                   + " ".join(stragglers))

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        """Raise the recorded exception now, if there is one."""
        with self._lock:
            if self._exc_info_to_raise is not None:
                _, value, tb = self._exc_info_to_raise
                raise value.with_traceback(tb)


__all__ = ["Coordinator"]
