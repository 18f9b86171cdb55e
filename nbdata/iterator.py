"""``nd.Iterator``: the one iterator type behind ``for``-loops and the four TF1 iterator kinds."""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any


from nbdata.errors import FailedPreconditionError, InvalidArgumentError, OutOfRangeError
from nbdata.plugins import provided
from nbdata.spec import (legacy_classes, legacy_shapes, legacy_types, TensorSpec, flatten, flatten_up_to, pack_as, same_structure,
                         specs_compatible, structure_repr)

_handles: "weakref.WeakValueDictionary[bytes, Iterator]" = weakref.WeakValueDictionary()
_handle_ids = itertools.count()

def graph_mode(dataset: Any = None) -> bool:
    """Whether iterators made now are graph objects: in graph mode
    (``nbdata.trace.graph.executing_eagerly`` false), or for a dataset of the
    ``nbdata.compat.v1`` namespace."""
    from nbdata.trace.graph import executing_eagerly
    return bool(getattr(dataset, "_graph_mode", False)) or not executing_eagerly()


def spec_from_types(output_types: Any, output_shapes: Any = None) -> Any:
    """Build a nested TensorSpec from TF1-style ``output_types`` / ``output_shapes``."""
    types_leaves = flatten(output_types)
    if output_shapes is None:
        shapes = [None] * len(types_leaves)
    else:
        shapes = flatten_shapes_up_to(output_types, output_shapes)
    return pack_as(output_types, [TensorSpec(s, t) for t, s in zip(types_leaves, shapes)])


def flatten_shapes_up_to(structure: Any, shapes: Any) -> list:
    """Flatten ``shapes`` following ``structure``; a shape is a tuple/list of dims at a leaf
    (or an object with ``as_list()``, as TensorFlow's TensorShape)."""
    out = []
    for shape in flatten_up_to(structure, shapes, "shapes"):
        if shape is not None and hasattr(shape, "as_list"):
            shape = shape.as_list()
        out.append(None if shape is None else tuple(shape))
    return out


def same_types(a: Any, b: Any) -> bool:
    """Whether two element specs have the same structure and the same dtypes (what an
    iterator and a dataset it is bound to, or an iterator behind a handle, must share)."""
    return same_structure(a, b) and all(x.dtype == y.dtype for x, y in zip(flatten(a), flatten(b)))


class Initializer:
    """Binds an iterator to a dataset; ``run(feed_dict)`` (or calling it) (re)starts it.

    >>> import numpy as np, nbdata as nd
    >>> it = nd.Iterator.from_structure(np.int64, ())
    >>> init = it.make_initializer(nd.Dataset.range(5, 7))
    >>> init()
    >>> int(it.get_next())
    5
    """

    def __init__(self, iterator: "Iterator", pipeline):
        self._iterator = iterator
        self._pipeline = pipeline

    def run(self, feed_dict: dict | None = None) -> None:
        """Start (or restart) the iterator on this initializer's dataset.

        >>> import nbdata as nd
        >>> it = nd.Dataset.range(3).make_initializable_iterator()
        >>> it.initializer.run(); _ = it.get_next(); it.initializer.run()
        >>> int(it.get_next())
        0
        """
        self._iterator._start(self._pipeline, feed_dict)

    __call__ = run


class Iterator:
    """Iterates a compiled dataset; ``get_next()`` raises OutOfRangeError at the end.

    Obtain one with ``iter(ds)``, ``ds.make_one_shot_iterator()``,
    ``ds.make_initializable_iterator()``, :meth:`from_structure` or
    :meth:`from_string_handle`.

    >>> import nbdata as nd
    >>> it = nd.Dataset.range(2).make_one_shot_iterator()
    >>> int(it.get_next()), int(it.get_next())
    (0, 1)
    >>> it.get_next()
    Traceback (most recent call last):
    ...
    nbdata.errors.OutOfRangeError: End of sequence
    """

    def __init__(self, element_spec: Any):
        self._spec = element_spec
        # Held to start, save and restore a run; threads calling next() meanwhile get
        # disjoint elements from the run itself (compiler/executor.py ChunkedRun).
        self._lock = threading.RLock()
        self._raw = None
        # The run whose elements ``__next__`` takes directly (the raw run, unless this
        # is a feedable iterator): one step of C code per element (ChunkedRun.elements).
        self._run = None
        self._pipeline = None
        self._feed = None
        self._finished = False
        self._initializer: Initializer | None = None
        self._handle_placeholder = None

    # ------------------------------------------------------------ structure
    @property
    def element_spec(self) -> Any:
        """The nested TensorSpec of the elements this iterator yields.

        >>> import nbdata as nd
        >>> iter(nd.Dataset.range(2)).element_spec
        TensorSpec(shape=(), dtype=int64, name=None)
        """
        return self._spec

    @property
    def output_types(self) -> Any:
        """TF1-style dtypes of the elements.

        >>> import nbdata as nd
        >>> iter(nd.Dataset.range(2)).output_types
        dtype('int64')
        """
        return legacy_types(self._spec)

    @property
    def output_shapes(self) -> Any:
        """TF1-style shapes of the elements.

        >>> import nbdata as nd
        >>> iter(nd.Dataset.range(4).batch(2)).output_shapes
        TensorShape([None])
        """
        return legacy_shapes(self._spec)

    @property
    def output_classes(self) -> Any:
        """TF1-style classes of the elements (``np.ndarray`` for dense leaves,
        ``nd.SparseTensor`` for sparse ones).

        >>> import nbdata as nd
        >>> iter(nd.Dataset.range(2)).output_classes
        <class 'numpy.ndarray'>
        """
        return legacy_classes(self._spec)

    # ---------------------------------------------------------------- start
    def _start(self, pipeline, feed_dict: dict | None, run=None) -> None:
        """Iterate ``pipeline`` from its start: a run it opens, or ``run`` (one it
        started over for this iterator)."""
        with self._lock:
            if self._raw is not None:  # first: the old run may hold a cache writer's lock
                self._raw.close()
            self._raw = None
            self._raw, self._finished = (pipeline.open(feed_dict) if run is None else run), False
            self._run = self._raw if self._handle_placeholder is None else None
            self._pipeline, self._feed = pipeline, feed_dict

    # --------------------------------------------------------------- state
    def save(self) -> bytes:
        """The iterator's state as bytes: positions, counters, seeds and the few rows an
        op holds (a partial batch, a shuffle buffer over a stream), so that
        :meth:`restore` on an iterator of the same dataset, in this process or another,
        resumes at the next element.

        >>> import nbdata as nd
        >>> ds = nd.Dataset.range(6).shuffle(6, seed=1).batch(2)
        >>> it = iter(ds)
        >>> first = next(it)
        >>> state = it.save()
        >>> rest = [b.tolist() for b in it]
        >>> again = iter(ds)
        >>> again.restore(state)
        >>> [b.tolist() for b in again] == rest
        True
        """
        with self._lock:
            if self._raw is None:
                raise FailedPreconditionError("save: the iterator has not been initialized")
            return self._pipeline.save_state(self._raw)

    def restore(self, state: bytes) -> None:
        """Resume from the bytes of :meth:`save`. A state that is corrupt or cut short
        (DataLossError), or saved by an iterator of another pipeline (NotFoundError, or
        InvalidArgumentError naming the op that does not fit), is refused before anything
        changes: the iterator goes on where it was. A state refused only as the ops
        resume (a shuffle buffer of another size, fed through a placeholder) leaves the
        iterator ended until it is restored or initialized again."""
        with self._lock:
            if self._pipeline is None:
                raise FailedPreconditionError("restore: the iterator has not been initialized "
                                              "(run its initializer first)")
            doc = self._pipeline.read_state(state)
            self._raw.close()  # first: the old run may hold a cache writer's lock
            self._run = None
            try:
                self._raw = self._pipeline.resume(doc, self._feed)
            except BaseException:
                self._finished = True   # its run is closed: it ends (until restored again)
                raise
            self._finished = False
            self._run = self._raw if self._handle_placeholder is None else None

    @property
    def initializer(self) -> Initializer:
        """The Initializer of an initializable iterator.

        >>> import nbdata as nd
        >>> it = nd.Dataset.range(2).make_initializable_iterator()
        >>> it.initializer.run()
        >>> int(it.get_next())
        0
        """
        if self._initializer is None:
            raise FailedPreconditionError("this iterator has no initializer of its own; use "
                                          "make_initializer(dataset)")
        return self._initializer

    def initialize(self, feed_dict: dict | None = None) -> None:
        """(Re)start an initializable iterator, binding placeholders from ``feed_dict``.

        >>> import numpy as np, nbdata as nd
        >>> n = nd.placeholder(np.int64, shape=[])
        >>> it = nd.Dataset.range(n).make_initializable_iterator()
        >>> it.initialize(feed_dict={n: 2})
        >>> [int(x) for x in it]
        [0, 1]
        """
        self.initializer.run(feed_dict)

    def make_initializer(self, dataset) -> Initializer:
        """An Initializer that restarts this iterator on ``dataset`` (same structure and types).

        >>> import numpy as np, nbdata as nd
        >>> it = nd.Iterator.from_structure(np.int64, ())
        >>> it.make_initializer(nd.Dataset.range(3)).run()
        >>> int(it.get_next())
        0
        >>> it.make_initializer(nd.Dataset.range(10, 13)).run()
        >>> int(it.get_next())
        10
        """
        spec = dataset.element_spec
        if not same_types(self._spec, spec):
            raise TypeError(
                f"make_initializer: the dataset's element spec {spec} is incompatible with "
                f"the iterator's {self._spec} (structures and dtypes must match)")
        if not specs_compatible(self._spec, spec):
            raise TypeError(
                f"make_initializer: the dataset's shapes {spec} are incompatible with the "
                f"iterator's {self._spec}")
        return Initializer(self, dataset.compile())

    @classmethod
    def from_structure(cls, output_types: Any, output_shapes: Any = None,
                       shared_name: str | None = None, output_classes: Any = None) -> "Iterator":
        """A reinitializable iterator, bound to a dataset with :meth:`make_initializer`.

        >>> import numpy as np, nbdata as nd
        >>> it = nd.Iterator.from_structure((np.int64, np.float64), ((), (2,)))
        >>> it.element_spec[1]
        TensorSpec(shape=(2,), dtype=float64, name=None)
        >>> it.get_next()
        Traceback (most recent call last):
        ...
        nbdata.errors.FailedPreconditionError: GetNext() failed because the iterator has not been initialized: run its initializer (it.initialize(...) or make_initializer(ds).run()) first
        """
        if graph_mode():
            return provided("graph_iterator").from_structure(output_types, output_shapes, shared_name)
        return cls(spec_from_types(output_types, output_shapes))

    @classmethod
    def from_string_handle(cls, string_handle, output_types: Any, output_shapes: Any = None,
                           output_classes: Any = None) -> "Iterator":
        """A feedable iterator: ``get_next(feed_dict={string_handle: h})`` takes the next
        element of the iterator whose ``string_handle()`` is ``h``.

        >>> import numpy as np, nbdata as nd
        >>> handle = nd.placeholder(nd.string, shape=[])
        >>> it = nd.Iterator.from_string_handle(handle, np.int64, ())
        >>> a = nd.Dataset.range(3).make_one_shot_iterator()
        >>> b = nd.Dataset.range(10, 13).make_one_shot_iterator()
        >>> ha, hb = a.string_handle(), b.string_handle()
        >>> [int(it.get_next(feed_dict={handle: h})) for h in (ha, hb, ha)]
        [0, 10, 1]
        """
        from nbdata.trace.graph import Tensor
        if graph_mode() or isinstance(string_handle, Tensor):
            return provided("graph_iterator").from_string_handle(string_handle, output_types, output_shapes)
        it = cls(spec_from_types(output_types, output_shapes))
        it._handle_placeholder = string_handle
        return it

    def string_handle(self, name: str | None = None) -> bytes:
        """A handle naming this iterator, for feedable iterators.

        >>> import nbdata as nd
        >>> it = nd.Dataset.range(1).make_one_shot_iterator()
        >>> it.string_handle() == it.string_handle()
        True
        """
        handle = getattr(self, "_handle", None)
        if handle is None:
            handle = f"nbdata-iterator-{next(_handle_ids)}".encode()
            self._handle = handle
            _handles[handle] = self
        return handle

    # ------------------------------------------------------------ iteration
    def get_next_as_optional(self) -> Any:
        """The next element as an ``nd.experimental.Optional`` (empty at the end), as
        tf.data's ``iterator.get_next_as_optional()``.

        >>> import nbdata as nd
        >>> it = iter(nd.Dataset.range(1))
        >>> [bool(it.get_next_as_optional().has_value()) for _ in range(2)]
        [True, False]
        """
        from nbdata.optional import Optional
        try:
            return Optional(self.get_next(), True, self.element_spec)
        except OutOfRangeError:
            return Optional.empty(self.element_spec)

    def get_next(self, feed_dict: dict | None = None) -> Any:
        """The next element; OutOfRangeError at the end (and on every later call).

        >>> import nbdata as nd
        >>> it = iter(nd.Dataset.range(1))
        >>> int(it.get_next())
        0
        >>> for _ in range(2):
        ...     try:
        ...         it.get_next()
        ...     except nd.errors.OutOfRangeError:
        ...         print("end")
        end
        end
        """
        if self._handle_placeholder is not None:
            return self._feedable_next(feed_dict)
        while True:
            raw = self._raw     # no lock per element: the run hands out disjoint rows
            if raw is None:
                raise FailedPreconditionError(
                    "GetNext() failed because the iterator has not been initialized: run its "
                    "initializer (it.initialize(...) or make_initializer(ds).run()) first")
            if self._finished:
                raise OutOfRangeError("End of sequence")
            try:
                return next(raw)
            except StopIteration:
                if raw is self._raw:    # else restarted or restored meanwhile: go on
                    self._finished = True

    def _feedable_next(self, feed_dict):
        if not feed_dict or self._handle_placeholder not in feed_dict:
            raise InvalidArgumentError(
                "a feedable iterator needs feed_dict={handle_placeholder: other.string_handle()}")
        handle = feed_dict[self._handle_placeholder]
        if isinstance(handle, str):
            handle = handle.encode()
        target = _handles.get(bytes(handle))
        if target is None:
            raise InvalidArgumentError(f"no live iterator has the string handle {handle!r}")
        if not same_structure(self._spec, target._spec):
            raise InvalidArgumentError(
                f"the iterator behind handle {handle!r} has structure "
                f"{structure_repr(target._spec)}, expected {structure_repr(self._spec)}")
        return target.get_next()

    def __iter__(self) -> "Iterator":
        return self

    def __next__(self) -> Any:
        run = self._run
        if run is not None:
            try:   # the common case in one step
                return next(run.elements)
            except StopIteration:
                pass
            if run is self._raw and not self._finished:
                try:   # the run's next chunk (get_next's path, without its frames)
                    return next(run)
                except StopIteration:
                    if run is self._raw:   # (else restarted meanwhile: get_next goes on)
                        self._finished = True
                        raise
        try:
            return self.get_next()
        except OutOfRangeError:
            raise StopIteration from None
