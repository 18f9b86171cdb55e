"""Progress of long command-line work (``python -m nbdata inspect`` of a large file,
``fuzz``): a ``tqdm`` bar when tqdm is installed, else one line on stderr rewritten at
most twice a second. Shown when stderr is a terminal, or when ``NBDATA_PROGRESS=1``
(``NBDATA_PROGRESS=0`` hides it)."""

from __future__ import annotations

import os
import sys
import time


def _enabled() -> bool:
    setting = os.environ.get("NBDATA_PROGRESS", "")
    if setting in ("0", "1"):
        return setting == "1"
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


class Progress:
    """``update(n)`` as work is done, ``close()`` at the end (or use it as a context
    manager). ``total`` None: a count without an end."""

    def __init__(self, desc: str, total: int | None = None, unit: str = "it"):
        self.desc, self.total, self.unit = desc, total, unit
        self.n = 0
        self.bar = None
        self.enabled = _enabled()
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
