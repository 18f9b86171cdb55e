"""Record decoders as plan operations.

``nd.io.parse_single_example``, ``parse_example``, ``decode_csv`` and ``decode_raw``
are plain functions on bytes; inside a ``map`` whose element is a string (a record
of a file dataset), the compiler wants to run them as kernels over a whole column
of records instead. This module is the meeting point:

- while a map function is traced, a string element is a :class:`RecordProbe`; a
  decoder given a probe records itself (a :class:`Decoder`: what to run on a column
  of records and the spec it yields) and returns sample values of that spec, so the
  function's output spec is exact without touching data;
- the ``decode_lifting`` pass then splits ``map(f)`` into a ``decode`` node (the
  decoder's kernel on each chunk of records) and ``map(rest)``, where ``rest`` is
  ``f`` called with a :class:`Decoded` stand-in whose decoder call returns the
  already decoded value: the rest is ordinary NumPy code on arrays and fuses.

A probe refuses every other use (comparison, ``len``, arithmetic, conversion), so
a function is lifted only when the record reaches its output through one decoder.
"""

from __future__ import annotations

from typing import Any

from nbdata.spec import TensorSpec, dummy_leaf, flatten, flatten_up_to, pack_as, string


class ProbeMisuse(TypeError):
    """A traced function used a record other than by passing it to one decoder."""


class Decoder:
    """A decoder call found while tracing: ``decode(column)`` runs it on a column of
    records. Subclasses (one per decoder) are defined next to their functions.

    Attributes:
        name: the decoder's name in plans (``parse_example``).
        batched: True when each element is a vector of records (after ``batch``).
        spec: the element spec of one decoded record (batched decoders add the batch
            dimension themselves).
    """

    name = "decoder"
    batched_name = "decoder"   # the name of the batched form (parse_example)
    batched = False
    identity = False           # the traced function returned the decoded value unchanged

    @property
    def spec(self) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        return self.name

    def call(self, value: Any) -> Any:
        """The decoder on one element's value (the element path)."""
        raise NotImplementedError

    def decode_rows(self, column, rows: int, batch: int | None = None) -> list:
        """Decoded columns (``flatten`` order of ``spec``) of the first ``rows`` records
        of ``column`` (a StringColumn). Raises :class:`RowError` naming the first bad
        row, with the error the decoder raises for it: the per-record decoder's, or with
        ``batch`` the batched decoder's on the batch of ``batch`` records holding it."""
        raise NotImplementedError

    def batch_columns(self, columns: list, count: int, size: int) -> list:
        """Columns of ``count`` batches of ``size`` decoded rows (what the batched decoder
        yields), from the row columns of ``count * size`` rows: rows stacked, sparse
        values batched into one sparse tensor. Raises :class:`RowError` for rows that
        cannot share a batch."""
        from nbdata.ops.batch import batch_columns, stack_leaves
        return batch_columns(columns, count, size,
                             lambda values, i: stack_leaves(values, i, self.batched_name), copy=False)

    def sample(self, variant: int) -> Any:
        """A value of the output spec (for tracing). Its strings are sample records, so
        that a decoder called on a decoded string (``decode_jpeg`` of an Example's
        image feature) traces to its own sample value."""
        spec = self.output_spec
        return pack_as(spec, [_sample_strings(dummy_leaf(s, variant), variant)
                              for s in flatten(spec)])

    @property
    def output_spec(self) -> Any:
        """What one call returns: ``spec``, batched when the decoder is."""
        return self.spec


class RowError(Exception):
    """A decoder failed on row ``row`` of a column; ``error`` is the nd.errors exception
    to raise (its message names the record)."""

    def __init__(self, row: int, error: BaseException):
        super().__init__(str(error))
        self.row = row
        self.error = error


class RecordProbe:
    """Stands for a string element (shape ``()`` or ``(n,)``) while a map function is
    traced. See the module docstring."""

    def __init__(self, spec: TensorSpec, variant: int):
        self.spec = spec
        self.variant = variant
        self.decoder: Decoder | None = None
        self.result: Any = None

    @property
    def shape(self):
        return self.spec.shape

    @property
    def dtype(self):
        return string

    def record(self, decoder: Decoder) -> Any:
        if self.decoder is not None:
            raise ProbeMisuse("the record is decoded twice")
        self.decoder = decoder
        self.result = decoder.sample(self.variant)
        return self.result

    def _refuse(self, *args, **kwargs):
        raise ProbeMisuse("records are only traced through nd.io decoders")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __add__ = __radd__ = __mul__ = __rmul__ = __mod__ = __getitem__ = __iter__ = _refuse
    __len__ = __bool__ = __index__ = __int__ = __float__ = __bytes__ = __str__ = _refuse
    __array__ = __array_ufunc__ = __array_function__ = __contains__ = __hash__ = _refuse

    def __repr__(self) -> str:
        return f"RecordProbe({self.spec})"


class Decoded:
    """Stands for a record that the plan has decoded already: the decoder that would
    decode it returns ``value`` (the decoded element)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def _refuse(self, *args, **kwargs):
        raise ProbeMisuse("a lifted function used its record other than through its decoder")

    __eq__ = __add__ = __getitem__ = __iter__ = __len__ = __bool__ = __bytes__ = _refuse
    __hash__ = None


class SampleRecord(bytes):
    """A sample record (a real ``bytes`` value) given to a function traced with sample
    data: a decoder given one returns sample values of its output spec, so that a
    function that also uses its record otherwise (``len(r)``) still traces exactly."""

    variant = 0

    @classmethod
    def make(cls, value: bytes, variant: int) -> "SampleRecord":
        out = cls(value)
        out.variant = variant
        return out


def _sample_strings(leaf: Any, variant: int) -> Any:
    """``leaf`` with its bytes values made :class:`SampleRecord`s."""
    import numpy as np
    if isinstance(leaf, bytes):
        return SampleRecord.make(leaf, variant)
    if isinstance(leaf, np.ndarray) and leaf.dtype == object:
        out = np.empty(leaf.size, dtype=object)
        out[:] = [SampleRecord.make(v, variant) if isinstance(v, bytes) else v
                  for v in leaf.reshape(-1)]
        return out.reshape(leaf.shape)
    return leaf


def _sample_variant(value: Any) -> int | None:
    if isinstance(value, SampleRecord):
        return value.variant
    import numpy as np
    if (isinstance(value, np.ndarray) and value.dtype == object and value.size
            and isinstance(value.flat[0], SampleRecord)):
        return value.flat[0].variant
    return None


def probed(value: Any, make) -> Any:
    """What a decoder function returns for ``value`` when tracing or lifting:
    ``make()`` (a Decoder) recorded on a probe, the decoded value of a
    :class:`Decoded`, or ``None`` for real data (then the caller decodes)."""
    if isinstance(value, RecordProbe):
        return value.record(make())
    if isinstance(value, Decoded):
        return value.value
    variant = _sample_variant(value)
    if variant is not None:
        return make().sample(variant)
    return None


def _same_value(out: Any, result: Any) -> bool:
    """Whether a traced function returned the decoder's result as it is (a list of the
    same items counts: a top-level list is a tuple element anyway)."""
    if out is result:
        return True
    return (isinstance(out, (list, tuple)) and isinstance(result, (list, tuple))
            and len(out) == len(result) and all(a is b for a, b in zip(out, result)))


def probe_function(fn, spec) -> tuple[list, Decoder | None]:
    """Calls ``fn`` on a probe for each variant; returns the outputs and the decoder
    when ``fn`` decoded its record with exactly one decoder call (else None); the
    decoder's ``identity`` says whether ``fn`` returned the decoded value as it is.
    Raises whatever ``fn`` raised."""
    outputs, decoders, identity = [], [], True
    for variant in range(3):
        probe = RecordProbe(spec, variant)
        out = fn(probe)
        outputs.append(out)
        decoders.append(probe.decoder)
        identity = identity and probe.decoder is not None and _same_value(out, probe.result)
    decoder = decoders[0]
    if decoder is not None:
        decoder.identity = identity
    return outputs, decoder


def probe_leaf_function(fn, spec, inputs, call) -> tuple[int, list, "Decoder | None"]:
    """Like :func:`probe_function` for an element holding strings among other values:
    for each scalar string leaf in turn, ``fn`` is called (by ``call(fn, element)``) on
    ``inputs(variant)`` with that leaf a probe. Returns the first leaf index that ``fn``
    decodes with exactly one decoder call, the outputs and the decoder, else
    ``(-1, [], None)``. Raises nothing: any failure means "not this leaf"."""
    leaves = flatten(spec)
    for k, leaf in enumerate(leaves):
        if not (isinstance(leaf, TensorSpec) and leaf.dtype is string and leaf.shape == ()):
            continue
        outputs, decoder = [], None
        try:
            for variant in range(3):
                values = flatten(inputs(variant))
                probe = RecordProbe(leaf, variant)
                values[k] = probe
                outputs.append(call(fn, pack_as(spec, values)))
                if probe.decoder is None or probe.decoder.batched:
                    decoder = None
                    break
                decoder = decoder or probe.decoder
        except Exception:  # noqa: BLE001 - the leaf is used otherwise: not this one
            decoder = None
        if decoder is not None:
            decoder.identity = False
            return k, outputs, decoder
    return -1, [], None


def leaf_output_spec(spec, leaf: int, decoded_spec):
    """``spec`` with its leaf ``leaf`` replaced by ``decoded_spec``."""
    leaves = flatten(spec)
    leaves[leaf] = decoded_spec
    return pack_as(spec, leaves)


def lifted_leaf_rest(fn, in_spec, leaf: int, out_spec, call):
    """``rest(element)``: ``fn`` on the element as it was before leaf ``leaf`` was decoded,
    that leaf a :class:`Decoded` holding its decoded value (``call`` is the tf.data
    calling convention)."""
    is_tuple = isinstance(out_spec, tuple)

    def rest(*parts):
        element = tuple(parts) if is_tuple else parts[0]
        values = flatten_up_to(in_spec, element, "decoded element")
        values[leaf] = Decoded(values[leaf])
        return call(fn, pack_as(in_spec, values))
    rest.__qualname__ = f"{getattr(fn, '__qualname__', 'fn')}.after_decode"
    return rest


def lifted_rest(fn, spec):
    """``rest(decoded) = fn(Decoded(decoded))``: the part of ``fn`` after its decoder
    (called the tf.data way: a tuple element comes unpacked)."""
    is_tuple = isinstance(spec, tuple)

    def rest(*parts):
        return fn(Decoded(tuple(parts) if is_tuple else parts[0]))
    rest.__qualname__ = f"{getattr(fn, '__qualname__', 'fn')}.after_decode"
    return rest


def for_probe(decoder: "Decoder", probe: Any) -> "Decoder":
    """``decoder`` as the traced call made it: batched (a :class:`BatchedDecoder`) when
    the probe stands for a vector of records, else per record."""
    if getattr(probe, "shape", ()):
        return BatchedDecoder(decoder, probe.shape[0])
    return decoder


class BatchedDecoder(Decoder):
    """A per-record decoder applied to each element's vector of records (what
    ``parse_example`` is to ``parse_single_example``): decoded rows are stacked into
    batches; sparse values batch into one sparse tensor."""

    batched = True

    def __init__(self, inner: Decoder, batch_dim: int | None):
        self.inner = inner
        self.batch_dim = batch_dim
        self.name = inner.batched_name

    @property
    def spec(self):
        return self.inner.spec

    @property
    def output_spec(self):
        from nbdata.ops.batch import batched_spec
        return batched_spec(self.inner.spec, self.batch_dim, self.name)

    def describe(self) -> str:
        return self.inner.describe().replace(self.inner.name, self.name, 1)

    def call(self, value):
        import numpy as np
        from nbdata.chunks import StringColumn
        records = [value] if isinstance(value, bytes) else list(np.asarray(value, object).reshape(-1))
        column = StringColumn.from_values(records)
        try:
            columns = self.inner.decode_rows(column, len(records), batch=len(records))
        except RowError as e:
            raise e.error from None
        out = self.batch_columns(columns, 1, len(records))
        from nbdata.chunks import col_row
        return pack_as(self.output_spec, [col_row(c, 0) for c in out])

    def decode_rows(self, column, rows: int, batch: int | None = None) -> list:
        return self.inner.decode_rows(column, rows, batch)

    def batch_columns(self, columns: list, count: int, size: int) -> list:
        return self.inner.batch_columns(columns, count, size)
