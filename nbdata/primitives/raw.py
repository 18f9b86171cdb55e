"""``decode_raw``: the bytes of records as arrays of numbers (``tf.io.decode_raw``).

>>> decode_raw(b"\\x01\\x00\\x02\\x00", np.int16).tolist()
[1, 2]
>>> decode_raw([b"\\x00\\x01", b"\\x00\\x02"], np.int16, little_endian=False).tolist()
[[1], [2]]
"""

from __future__ import annotations

import numpy as np

from nbdata.chunks import StringColumn
from nbdata.primitives.decoder import Decoder, RowError, for_records
from nbdata.primitives.gpu import Step
from nbdata.errors import InvalidArgumentError
from nbdata.spec import TensorSpec, as_dtype, string
from nbdata.primitives.table import define

_TF_NAMES = {"float16": "half", "float32": "float", "float64": "double"}


# TensorFlow's DecodeRaw types (bfloat16 has no NumPy dtype); DecodePaddedRaw (with
# fixed_length) takes the real ones only. float16 with fixed_length, which TensorFlow
# declares but has no CPU kernel for, works here.
_ALLOWED = ("float16", "float32", "float64", "int32", "uint16", "uint8", "int16", "int8",
            "int64", "complex64", "complex128", "bool")
_PADDED = _ALLOWED[:9]


def _out_type(out_type, padded: bool) -> np.dtype:
    try:
        dtype = as_dtype(out_type)
    except (TypeError, ValueError):
        dtype = None
    allowed = _PADDED if padded else _ALLOWED
    if dtype is None or dtype is string or dtype.name not in allowed:
        name = "string" if dtype is string else getattr(dtype, "name", repr(out_type))
        names = ", ".join(_TF_NAMES.get(a, a) for a in allowed)
        raise InvalidArgumentError(
            f"Value for attr 'out_type' of {name} is not in the list of allowed values: "
            f"{names}", "DecodePaddedRaw" if padded else "DecodeRaw")
    return dtype


def _check_size(size: int, dtype: np.dtype, op="DecodeRaw") -> None:
    if size % dtype.itemsize:
        raise InvalidArgumentError(
            f"Input to DecodeRaw has length {size} that is not a multiple of {dtype.itemsize}, "
            f"the size of {_TF_NAMES.get(dtype.name, dtype.name)}", op)


def _view(data: np.ndarray, dtype: np.dtype, little_endian: bool) -> np.ndarray:
    out = data.view(dtype.newbyteorder("<" if little_endian else ">"))
    return out.astype(dtype, copy=True)


def _pad(value: bytes, fixed_length: int) -> bytes:
    return value[:fixed_length].ljust(fixed_length, b"\0")


def _checked(out_type, fixed_length) -> np.dtype:
    """The output dtype, with ``fixed_length`` checked against it."""
    dtype = _out_type(out_type, fixed_length is not None)
    if fixed_length is not None and int(fixed_length) <= 0:
        raise InvalidArgumentError(f"fixed_length ({int(fixed_length)}) must be greater than "
                                   "zero.", "DecodePaddedRaw")
    if fixed_length is not None and int(fixed_length) % dtype.itemsize:
        raise InvalidArgumentError(f"fixed_length ({int(fixed_length)}) must be a multiple of "
                                   f"the size of out_type ({dtype.itemsize})", "DecodePaddedRaw")
    return dtype


def _raw_decoder(input_bytes, out_type, little_endian: bool = True, fixed_length=None, name=None):
    """The column decoder of a ``decode_raw`` call."""
    dtype = _checked(out_type, fixed_length)
    return for_records(RawDecoder(dtype, little_endian, fixed_length), input_bytes)


class _DeviceView(Step):
    """``nd.gpu.decode_raw``: the bytes of each row of an (n, k) uint8 device batch read as
    ``out_type`` values, shaped ``shape`` per element (default ``(k / itemsize,)``). No
    kernel: the same memory, viewed; first in a chain."""

    name = "decode_raw"
    kind = "decode"

    def __init__(self, out_type, shape=None):
        self.dtype = np.dtype(out_type)
        self.shape = None if shape is None else tuple(
            int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))

    def out_shape(self, shape):
        if len(shape) != 1 or shape[0] is None:
            raise TypeError(f"nd.gpu.decode_raw: expects (n, k) uint8 batches, got elements of "
                            f"shape {shape}")
        nbytes = shape[0]
        if nbytes % self.dtype.itemsize:
            raise ValueError(f"nd.gpu.decode_raw: {nbytes} bytes is not a multiple of the size "
                             f"of {self.dtype} ({self.dtype.itemsize})")
        count = nbytes // self.dtype.itemsize
        if self.shape is None:
            return (count,)
        if int(np.prod(self.shape, dtype=np.int64)) != count:
            raise ValueError(f"nd.gpu.decode_raw: {count} values do not fill shape {self.shape}")
        return self.shape

    def out_dtype(self, dtype):
        if dtype != np.uint8:
            raise TypeError(f"nd.gpu.decode_raw: expects (n, k) uint8 batches, got {dtype}")
        return self.dtype

    def decode(self, x):
        if x.dtype != np.uint8 or x.ndim != 2:
            raise TypeError(f"nd.gpu.decode_raw: expects an (n, k) uint8 batch, got {x.dtype} "
                            f"{x.shape}")
        return x.view(self.dtype, (x.shape[0],) + self.out_shape(x.shape[1:]))

    def describe(self):
        return f"decode_raw({self.dtype.name}): the batch's bytes viewed as values, no copy"


@define(tags=("io", "tf"),
        abstract=lambda *args, **kwargs: _raw_decoder(*args, **kwargs).output_spec,
        decoder=_raw_decoder, gpu=_DeviceView)
def decode_raw(input_bytes, out_type, little_endian: bool = True, fixed_length=None, name=None):
    """Reinterpret the bytes of records as numbers (``tf.io.decode_raw``).

    Args:
        input_bytes: a record (``bytes``) or an array/list of records of any shape.
        out_type: the element dtype (uint8, int8, int16, uint16, int32, int64, float16,
            float32, float64, complex64, complex128, bool, ...).
        little_endian: the byte order of the records.
        fixed_length: when given, each record is cut or zero-padded to this many bytes.
        name: ignored (TensorFlow's op name).

    Returns:
        The records' shape plus one dimension of ``len(record) / itemsize``.

    Raises:
        InvalidArgumentError: a length that is not a multiple of the dtype's size, or
            records of different lengths in a batch (TensorFlow's messages).
    """
    dtype = _checked(out_type, fixed_length)
    if isinstance(input_bytes, (bytes, bytearray, memoryview, np.bytes_, str)) or (
            isinstance(input_bytes, np.ndarray) and input_bytes.ndim == 0):
        value = input_bytes.item() if isinstance(input_bytes, np.ndarray) else input_bytes
        value = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        if fixed_length is not None:
            value = _pad(value, int(fixed_length))
        _check_size(len(value), dtype)
        return _view(np.frombuffer(value, np.uint8), dtype, little_endian)
    if isinstance(input_bytes, StringColumn):
        values, shape = input_bytes.values(), (len(input_bytes),)
    else:
        arr = np.asarray(input_bytes, dtype=object) if isinstance(input_bytes, (list, tuple)) \
            else input_bytes
        values = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in arr.reshape(-1)]
        shape = arr.shape
    try:
        return _decode_batch(values, shape, dtype, little_endian, fixed_length)
    except RowError as e:
        raise e.error from None


def _decode_batch(values, shape, dtype, little_endian, fixed_length, first_row: int = 0):
    if fixed_length is not None:
        values = [_pad(v, int(fixed_length)) for v in values]
    if not values:
        width = 0 if fixed_length is None else int(fixed_length) // dtype.itemsize
        return np.zeros(tuple(shape) + (width,), dtype)
    size = len(values[0])
    for i, v in enumerate(values):
        if len(v) != size:
            raise RowError(first_row + i, InvalidArgumentError(
                f"DecodeRaw requires input strings to all be the same size, but element {i} "
                f"has size {size} != {len(v)}", "DecodeRaw"))
    _check_size(size, dtype)
    data = np.frombuffer(b"".join(values), np.uint8)
    return _view(data, dtype, little_endian).reshape(tuple(shape) + (size // dtype.itemsize,))


class RawDecoder(Decoder):
    """``decode_raw`` on each record of a column (see ``nbdata/primitives/decoder.py``)."""

    name = "decode_raw"
    batched_name = "decode_raw"

    def __init__(self, dtype, little_endian, fixed_length):
        self.dtype, self.little_endian, self.fixed_length = dtype, little_endian, fixed_length

    @property
    def spec(self):
        n = None if self.fixed_length is None else int(self.fixed_length) // self.dtype.itemsize
        return TensorSpec((n,), self.dtype)

    def describe(self) -> str:
        return f"decode_raw({self.dtype.name})"

    def decode_rows(self, column, rows: int, batch: int | None = None) -> list:
        offsets = column.offsets[:rows + 1]
        sizes = np.diff(offsets)
        if self.fixed_length is None and rows and (sizes == sizes[0]).all():
            size = int(sizes[0])
            if size % self.dtype.itemsize == 0:
                data = column.data[int(offsets[0]):int(offsets[-1])]
                out = _view(data, self.dtype, self.little_endian)
                return [out.reshape(rows, size // self.dtype.itemsize)]
        values = StringColumn(column.data, offsets).values()
        if self.fixed_length is not None:
            return [_decode_batch(values, (rows,), self.dtype, self.little_endian,
                                  self.fixed_length)]
        # Records of several lengths: one array per row (a batch of them fails in batch).
        out = []
        for r, v in enumerate(values):
            try:
                _check_size(len(v), self.dtype)
            except InvalidArgumentError as e:
                raise RowError(r, e) from None
            out.append(_view(np.frombuffer(v, np.uint8), self.dtype, self.little_endian))
        from nbdata.chunks import RowList
        return [RowList(out)]

    def batch_columns(self, columns, count, size):
        column = columns[0]
        if isinstance(column, np.ndarray):
            return [column.reshape((count, size) + column.shape[1:])]
        # Rows of different lengths: the batch that holds them fails, as in TensorFlow.
        for b in range(count):
            rows = column[b * size:(b + 1) * size]
            first = len(rows[0]) * self.dtype.itemsize
            for i, v in enumerate(rows):
                if len(v) * self.dtype.itemsize != first:
                    raise RowError(b * size + i, InvalidArgumentError(
                        "DecodeRaw requires input strings to all be the same size, but element "
                        f"{i} has size {first} != {len(v) * self.dtype.itemsize}", "DecodeRaw"))
        return [np.stack(column).reshape((count, size, -1))]
