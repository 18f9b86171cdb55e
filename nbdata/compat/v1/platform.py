"""TF1's non-op names input programs use: ``tf.gfile`` (local files, through ``os``),
``tf.logging`` (Python's ``logging``, logger ``"tensorflow"``), ``tf.summary`` (ops
recorded as no-ops: an input pipeline has no event files to write) and ``tf.compat``.

>>> import nbdata.compat.v1 as tf
>>> tf.gfile.Exists("/"), tf.compat.as_bytes("a"), tf.compat.as_text(b"b")
(True, b'a', 'b')
"""

from __future__ import annotations

import glob as _glob
import logging as _logging
import os
import shutil
import types

from nbdata import errors
from nbdata.trace.graph import constant, get_default_graph


# ------------------------------------------------------------------ gfile

def _not_found(path: str, what: str = "") -> errors.NotFoundError:
    return errors.NotFoundError(f"{path}; No such file or directory{what}")


class GFile:
    """``tf.gfile.GFile`` / ``Open`` / ``FastGFile``: a local file; text in ``"r"``/``"w"``
    modes, bytes in ``"rb"``/``"wb"``; a missing file raises NotFoundError."""

    def __init__(self, name, mode: str = "r"):
        name = os.fspath(name)
        try:
            self._f = open(name, mode)   # noqa: SIM115 - closed by close()/__exit__
        except FileNotFoundError:
            raise _not_found(name) from None
        self.name, self.mode = name, mode

    def __getattr__(self, attr):
        return getattr(self._f, attr)

    def __iter__(self):
        return iter(self._f)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()

    def size(self) -> int:
        return os.path.getsize(self.name)


def _exists(path) -> bool:
    return os.path.exists(os.fspath(path))


def _glob_paths(pattern) -> list:
    patterns = pattern if isinstance(pattern, (list, tuple)) else [pattern]
    return [p for pat in patterns for p in sorted(_glob.glob(os.fspath(pat)))]


def _list_directory(path) -> list:
    if not os.path.isdir(path):
        raise _not_found(path)
    return sorted(os.listdir(path))


def _remove(path) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        raise _not_found(path) from None


def _delete_recursively(path) -> None:
    if not os.path.exists(path):
        raise _not_found(path)
    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)


def _copy(oldpath, newpath, overwrite: bool = False) -> None:
    if not overwrite and os.path.exists(newpath):
        raise errors.AlreadyExistsError(f"file already exists: {newpath}")
    shutil.copyfile(oldpath, newpath)


def _rename(oldname, newname, overwrite: bool = False) -> None:
    if not overwrite and os.path.exists(newname):
        raise errors.AlreadyExistsError(f"file already exists: {newname}")
    os.replace(oldname, newname)


def _mkdir(path) -> None:
    try:
        os.mkdir(path)
    except FileExistsError:
        raise errors.AlreadyExistsError(f"directory already exists: {path}") from None


def _walk(top, in_order: bool = True):
    for root, dirs, files in os.walk(top, topdown=in_order):
        yield root, sorted(dirs), sorted(files)


def _stat(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise _not_found(path) from None
    return types.SimpleNamespace(length=st.st_size, mtime_nsec=st.st_mtime_ns,
                                 is_directory=os.path.isdir(path))


gfile = types.SimpleNamespace(
    GFile=GFile, Open=GFile, FastGFile=GFile, Exists=_exists, Glob=_glob_paths,
    IsDirectory=os.path.isdir, ListDirectory=_list_directory,
    MakeDirs=lambda path: os.makedirs(path, exist_ok=True), MkDir=_mkdir, Remove=_remove,
    DeleteRecursively=_delete_recursively, Copy=_copy, Rename=_rename, Walk=_walk, Stat=_stat)
# TF 2's spellings (tf.io.gfile), also in TF 1.14+
io_gfile = types.SimpleNamespace(
    GFile=GFile, exists=_exists, glob=_glob_paths, isdir=os.path.isdir, listdir=_list_directory,
    makedirs=gfile.MakeDirs, mkdir=_mkdir, remove=_remove, rmtree=_delete_recursively,
    copy=_copy, rename=_rename, walk=_walk, stat=_stat)


# ---------------------------------------------------------------- logging

_logger = _logging.getLogger("tensorflow")
logging = types.SimpleNamespace(
    DEBUG=_logging.DEBUG, INFO=_logging.INFO, WARN=_logging.WARNING, ERROR=_logging.ERROR,
    FATAL=_logging.FATAL, set_verbosity=_logger.setLevel,
    get_verbosity=_logger.getEffectiveLevel, debug=_logger.debug, info=_logger.info,
    warn=_logger.warning, warning=_logger.warning, error=_logger.error, fatal=_logger.critical,
    log=_logger.log)


# ---------------------------------------------------------------- summary

_SUMMARIES = "summaries"


def _summary(name, tensor=None, *args, collections=None, family=None, **kwargs):
    """A summary op: recorded as a string tensor holding no event (an input pipeline
    writes no event files), added to the summaries collection as in TF1."""
    out = constant(b"", name=name if isinstance(name, str) else None)
    for key in collections if collections is not None else [_SUMMARIES]:
        get_default_graph().add_to_collection(key, out)
    return out


def _merge(inputs, collections=None, name=None):
    return _summary(name or "Merge", collections=collections or [])


def _merge_all(key=_SUMMARIES, scope=None, name=None):
    return _merge([]) if get_default_graph().get_collection(key, scope) else None


class FileWriter:
    """``tf.summary.FileWriter``: accepts summaries and graphs and writes nothing."""

    def __init__(self, logdir, graph=None, **kwargs):
        self.logdir = logdir

    def add_summary(self, *args, **kwargs):
        pass

    add_graph = add_event = add_session_log = add_run_metadata = add_summary

    def flush(self):
        pass

    def close(self):
        pass

    def get_logdir(self):
        return self.logdir

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


summary = types.SimpleNamespace(
    scalar=_summary, image=_summary, histogram=_summary, audio=_summary, text=_summary,
    tensor_summary=_summary, merge=_merge, merge_all=_merge_all, FileWriter=FileWriter,
    FileWriterCache=types.SimpleNamespace(clear=lambda: None, get=FileWriter))


# ----------------------------------------------------------------- compat

def as_bytes(bytes_or_text, encoding: str = "utf-8") -> bytes:
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


def as_text(bytes_or_text, encoding: str = "utf-8") -> str:
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, (bytes, bytearray)):
        return bytes_or_text.decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


compat_names = dict(as_bytes=as_bytes, as_text=as_text, as_str=as_text, path_to_str=os.fspath,
                    as_str_any=lambda v: as_text(v) if isinstance(v, (bytes, str)) else str(v),
                    bytes_or_text_types=(bytes, str))


__all__ = ["FileWriter", "GFile", "as_bytes", "as_text", "gfile", "io_gfile", "logging", "summary"]
