"""Input files of the file-format workloads (w2, w3, jpeg), written once per size into
a cache folder under the system temp directory and reused by every row process."""

from __future__ import annotations

import os
import tempfile
from typing import Callable


def cached_file(name: str, write: Callable[[str], None]) -> str:
    """The path of the cached file `name`, calling `write(path)` to create it when absent.

    The file is written under a temporary name and renamed, so a row process never
    sees a half-written file."""
    folder = os.path.join(tempfile.gettempdir(), "nbdata-perf")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        partial = f"{path}.{os.getpid()}.partial"
        write(partial)
        os.replace(partial, path)
    return path
