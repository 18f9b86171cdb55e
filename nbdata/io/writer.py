"""``TFRecordWriter``: writes records as TFRecord frames that TensorFlow reads."""

from __future__ import annotations

import os
import zlib

import numpy as np

from nbdata.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from nbdata.kernels.files import compression_name
from nbdata.kernels.crc32c import masked_crc32c


class TFRecordOptions:
    """Options of a TFRecord file (``tf.io.TFRecordOptions``).

    Args:
        compression_type: None or "" (plain), "GZIP" or "ZLIB".
        compression_level: zlib's level, 0 to 9 (default: zlib's default, 6).

    >>> TFRecordOptions("GZIP").compression_type
    'GZIP'
    """

    def __init__(self, compression_type: str | None = None, compression_level: int | None = None):
        self.compression_type = compression_name(compression_type, "TFRecordOptions")
        if compression_level is not None and not 0 <= int(compression_level) <= 9:
            raise InvalidArgumentError(
                f"TFRecordOptions: compression_level must be in 0..9, got {compression_level}",
                "TFRecordOptions")
        self.compression_level = compression_level

    @classmethod
    def get_compression_type_string(cls, options) -> str:
        if isinstance(options, TFRecordOptions):
            return options.compression_type
        return compression_name(options, "TFRecordOptions")

    def __repr__(self) -> str:
        return f"TFRecordOptions(compression_type={self.compression_type!r})"


class TFRecordWriter:
    """Writes records to a TFRecord file (``tf.io.TFRecordWriter``).

    Each record is framed as its little-endian uint64 length, the masked CRC32C of
    the length, the bytes and their masked CRC32C; the file is compressed as a whole
    with GZIP or ZLIB when the options say so.

    Args:
        path: the file to create (replaced if it exists).
        options: None, "", "GZIP", "ZLIB" or a :class:`TFRecordOptions`.

    >>> import os, tempfile, nbdata as nd
    >>> path = os.path.join(tempfile.mkdtemp(), "x.tfrecord.gz")
    >>> with nd.io.TFRecordWriter(path, "GZIP") as w:
    ...     w.write(b"abc")
    >>> list(nd.TFRecordDataset(path, compression_type="GZIP"))
    [b'abc']
    """

    def __init__(self, path, options=None):
        self.options = (options if isinstance(options, TFRecordOptions)
                        else TFRecordOptions(compression_type=options))
        self.path = os.fspath(path.decode() if isinstance(path, bytes) else path)
        try:
            self.file = open(self.path, "wb")
        except FileNotFoundError:
            raise NotFoundError(f"{self.path}; No such file or directory", "TFRecordWriter") from None
        except IsADirectoryError:
            raise FailedPreconditionError(f"{self.path}; Is a directory", "TFRecordWriter") from None
        kind, level = self.options.compression_type, self.options.compression_level
        level = -1 if level is None else int(level)
        wbits = {"GZIP": 16 + zlib.MAX_WBITS, "ZLIB": zlib.MAX_WBITS}.get(kind)
        self.deflater = None if wbits is None else zlib.compressobj(level, zlib.DEFLATED, wbits)
        self.closed = False

    def _put(self, data: bytes) -> None:
        if self.deflater is not None:
            data = self.deflater.compress(data)
        if data:
            self.file.write(data)

    def write(self, record) -> None:
        """Appends one record (``bytes``, ``str`` as UTF-8, or a uint8 array)."""
        if self.closed:
            raise FailedPreconditionError(f"{self.path}: write to a closed TFRecordWriter",
                                          "TFRecordWriter")
        if isinstance(record, str):
            record = record.encode("utf-8")
        elif isinstance(record, np.ndarray):
            record = record.item() if record.dtype == object and record.ndim == 0 else record.tobytes()
        record = bytes(record)
        data = np.frombuffer(record, np.uint8)
        header = np.frombuffer(len(record).to_bytes(8, "little"), np.uint8)
        self._put(b"".join((
            header.tobytes(), int(masked_crc32c(header, 0, 8)).to_bytes(4, "little"),
            record, int(masked_crc32c(data, 0, len(data))).to_bytes(4, "little"))))

    def flush(self) -> None:
        """Writes what is buffered to the file. A compressed stream is synced
        (Z_SYNC_FLUSH): every record written so far inflates, and a reader (nbdata's or
        TensorFlow's) reads them all, without an error, while the stream is unfinished."""
        if self.closed:
            return
        if self.deflater is not None:
            self.file.write(self.deflater.flush(zlib.Z_SYNC_FLUSH))
        self.file.flush()

    def close(self) -> None:
        """Finishes the file (the compressed stream's trailer) and closes it."""
        if self.closed:
            return
        if self.deflater is not None:
            self.file.write(self.deflater.flush(zlib.Z_FINISH))
        self.file.close()
        self.closed = True

    def __enter__(self) -> "TFRecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
