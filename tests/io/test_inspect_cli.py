"""``python -m nbdata inspect``: exit status 1 and one line on stderr (file, error class,
offset) for any error; the format found by validating the file, not by guessing."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from nbdata.__main__ import main
from nbdata.kernels.records import frame_tfrecord

DATA = Path(__file__).resolve().parent.parent / "data"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())["files"]


def inspect_subprocess(*args):
    """(exit status, stdout, stderr) of ``python -m nbdata inspect ARGS``."""
    done = subprocess.run([sys.executable, "-m", "nbdata", "inspect", *map(str, args)],
                          capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def inspect(*args):
    """(exit status, stdout, stderr) of ``nbdata.__main__.main(["inspect", *ARGS])`` run
    in this process (what ``python -m nbdata inspect ARGS`` runs, without a new
    interpreter's start-up each time): the status is SystemExit's code, 0 on a return.
    test_the_module_entry_point_gives_the_same runs the real command."""
    out, err = io.StringIO(), io.StringIO()
    status = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["inspect", *map(str, args)])
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name, args", [
    ("corrupt_data_crc.tfrecord", ()),                  # status 1, summary + error line
    ("examples.tfrecord.gz", ("--records", "1")),       # status 0, summary + an Example
])
def test_the_module_entry_point_gives_the_same(name, args):
    """``python -m nbdata inspect`` in a process of its own: the same status, stdout and
    stderr as main() in this one."""
    path = DATA / name
    status, out, err = inspect_subprocess(path, *args)
    assert status == (1 if "corrupt" in name else 0)
    assert out.startswith(f"{path}: tfrecord file")
    assert (status, out, err) == inspect(path, *args)


@pytest.mark.parametrize("name, records, what", [
    ("corrupt_length_crc.tfrecord", 1,
     "corrupted record at 24 (the length's CRC32C does not match)"),
    ("corrupt_data_crc.tfrecord", 1, "corrupted record at 36 (the data's CRC32C does not match)"),
    ("truncated.tfrecord", 2, "truncated record at 48 (the file ends inside the record)"),
])
def test_damaged_tfrecord_exits_nonzero_with_one_line(name, records, what):
    entry = MANIFEST[name]
    assert entry["then"]["error"] == "DataLossError" and str(entry["offset_in_message"]) in what
    assert len(entry["records_before_error_latin1"]) == records
    path = DATA / name
    status, out, err = inspect(path)
    assert status == 1
    assert f"{path}: tfrecord file, {records} records before a DataLossError" in out
    assert err == f"{path}: DataLossError: {what}\n"


@pytest.mark.parametrize("make, kind", [
    (lambda p: None, "NotFoundError: No such file or directory"),
    (lambda p: p.mkdir(), "FailedPreconditionError: Is a directory"),
])
def test_missing_file_or_directory_is_one_line(tmp_path, make, kind):
    path = tmp_path / "target"
    make(path)
    status, out, err = inspect(path)
    assert (status, out, err) == (1, "", f"{path}: {kind}\n")


def test_bad_first_length_checksum_is_not_a_healthy_text_file(tmp_path):
    """A TFRecord file whose first length CRC is wrong was shown as "text file, 2
    records": it is neither a valid TFRecord nor text."""
    data = bytearray(b"".join(frame_tfrecord(b"record-%d" % i) for i in range(3)))
    data[8] ^= 0xFF
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(data))
    status, out, err = inspect(path)
    assert status == 1 and out == ""
    assert err == (f"{path}: DataLossError: corrupted record at 0: not a TFRecord file (the "
                   "masked CRC32C at offset 8 does not match the first record's length) and not "
                   "a text file (control byte 0x08 at offset 0 of the file); give --format to "
                   "read it anyway\n")
    # Asked for explicitly, it is read as a TFRecord file, and fails at once.
    status, out, err = inspect(path, "--format", "tfrecord")
    assert status == 1 and "tfrecord file, 0 records before a DataLossError" in out
    assert err.startswith(f"{path}: DataLossError: corrupted record at 0")


@pytest.mark.parametrize("name, summary", [
    ("examples.tfrecord.gz", "tfrecord file, GZIP, 5 records\n"),
    ("examples.tfrecord.zlib", "tfrecord file, ZLIB, 5 records\n"),
    ("examples.tfrecord", "tfrecord file, 5 records\n"),
    ("lines_lf.txt.zlib", "text file, ZLIB, 5 records\n"),
    ("lines_lf.txt.gz", "text file, GZIP, 5 records\n"),
    ("empty.txt", "text file, 0 records\n"),
])
def test_healthy_files_exit_zero(name, summary):
    path = DATA / name
    status, out, err = inspect(path)
    assert (status, err) == (0, "")
    assert out.startswith(f"{path}: {summary}")


def test_compression_is_validated_by_inflating(tmp_path):
    path = tmp_path / "fake.gz"
    path.write_bytes(b"\x1f\x8b" + b"not really gzip data")
    status, out, err = inspect(path)
    assert (status, out) == (1, "")
    assert err == (f"{path}: DataLossError: starts with GZIP's magic bytes but is no GZIP "
                   "stream: inflating from offset 0 fails (unknown compression method)\n")
    # "x^" happens to pass ZLIB's two-byte header check; it does not inflate: plain text.
    path = tmp_path / "looks_like_zlib.txt"
    path.write_bytes(b"x^ hello\nworld\n")
    assert inspect(path)[:2] == (0, f"{path}: text file, 2 records\n  line 0: b'x^ hello'\n"
                                    "  line 1: b'world'\n")


def test_corrupt_compressed_stream_names_the_offsets(tmp_path):
    body = b"".join(frame_tfrecord(b"r%d" % i) for i in range(100))
    packed = bytearray(gzip.compress(body, mtime=0))
    packed[-8] ^= 0x55                          # the CRC-32 in the trailer
    path = tmp_path / "bad.tfrecord.gz"
    path.write_bytes(bytes(packed))
    status, out, err = inspect(path)
    assert status == 1 and "tfrecord file, GZIP, 0 records before a DataLossError" in out
    assert err == (f"{path}: DataLossError: corrupt GZIP stream in the compressed bytes at "
                   f"offsets 0..{len(packed)}: inflate() failed with error -3: incorrect data "
                   "check\n")
    # A cut stream is no error by itself (as in TensorFlow): its whole records are read.
    path.write_bytes(zlib.compress(body)[:-4])
    assert inspect(path, "--records", "0")[:2] == (0, f"{path}: tfrecord file, ZLIB, 100 records\n")
