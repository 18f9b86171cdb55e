"""Dataset iterators in graph mode (TF1's ``tf.data.Iterator`` inside a graph).

In graph mode (inside ``with graph.as_default():``, after
``nd.compat.v1.disable_eager_execution()``, or for the datasets of the
``nbdata.compat.v1`` namespace) an iterator is a graph object, as in TF1:

- ``get_next()`` returns graph tensors nested like the element; one ``Session.run``
  advances the iterator once however many of those tensors it fetches (each
  ``get_next()`` call is its own op, as in TF), and raises OutOfRangeError at the end;
- ``initializer`` / ``make_initializer(ds)`` are operations; placeholders used by the
  dataset are fed through the ``feed_dict`` of the run that runs them;
- ``string_handle()`` is a string tensor and ``from_string_handle(placeholder, ...)`` an
  iterator whose ``get_next()`` reads the iterator whose handle is fed;
- ``make_saveable_from_iterator`` + ``nd.train.Saver`` save and restore the position.

The state of an iterator lives in each session that runs it: its runtime is an eager
:class:`nbdata.iterator.Iterator` kept among the session's resources. Nothing here runs
a pipeline until a session runs one of these operations.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

from nbdata import iterator as eager
from nbdata.errors import FailedPreconditionError, InvalidArgumentError
from nbdata.spec import (DatasetSpec, TensorSpec, flatten, legacy_classes, legacy_shapes,
                         legacy_types, pack_as, specs_compatible, string, structure_repr)
from nbdata.trace.graph import Operation, Tensor, get_default_graph
from nbdata.trace.placeholder import Placeholder

_handles: "weakref.WeakValueDictionary[bytes, GraphIterator]" = weakref.WeakValueDictionary()
_ids = itertools.count()


class GraphIterator:
    """A Dataset iterator as a graph object (see the module docstring).

    >>> import nbdata as nd
    >>> with nd.Graph().as_default():
    ...     it = nd.Dataset.range(3).make_one_shot_iterator()
    ...     nxt = it.get_next()
    ...     with nd.Session() as sess:
    ...         print([int(sess.run(nxt)) for _ in range(3)])
    [0, 1, 2]
    """

    def __init__(self, spec: Any, graph=None, pipeline=None, dataset=None,
                 handle: Any = None, kind: str = "structure", shared_name: str | None = None):
        for leaf in flatten(spec):
            if isinstance(leaf, DatasetSpec):
                raise TypeError("a graph-mode iterator cannot yield datasets (window elements); "
                                "flat_map them first")
        self._spec = spec
        self.graph = graph or get_default_graph()
        self._pipeline = pipeline          # one-shot: started on first get_next
        self._dataset = dataset            # initializable: its initializer's dataset
        self._kind = kind                  # "one_shot", "initializable", "structure", "feedable"
        self._handle_tensor = handle
        self._initializer: Operation | None = None
        self._string_handle: Tensor | None = None
        self.name = shared_name or f"Iterator_{next(_ids)}"
        self._handle = f"nbdata-graph-iterator-{next(_ids)}".encode()
        _handles[self._handle] = self

    # ------------------------------------------------------------ structure
    @property
    def element_spec(self) -> Any:
        return self._spec

    @property
    def output_types(self) -> Any:
        return legacy_types(self._spec)

    @property
    def output_shapes(self) -> Any:
        return legacy_shapes(self._spec)

    @property
    def output_classes(self) -> Any:
        return legacy_classes(self._spec)

    def __repr__(self) -> str:
        return f"<nd.Iterator (graph) {self.name} element_spec={self._spec}>"

    def __iter__(self):
        raise TypeError(
            f"{self.name} is a graph-mode iterator (made inside a graph or a session's block, "
            "after disable_eager_execution, or from nbdata.compat.v1): fetch its elements with "
            "sess.run(iterator.get_next()), or make the iterator outside a graph to iterate "
            "it in Python")

    # -------------------------------------------------------------- runtime
    def runtime(self, session) -> eager.Iterator:
        """This iterator's state in ``session`` (an eager iterator, made on first use)."""
        return session.resource(self, lambda: eager.Iterator(self._spec))

    def _running(self, session) -> eager.Iterator:
        """The runtime, started first for a one-shot iterator."""
        rt = self.runtime(session)
        if rt._raw is None and self._kind == "one_shot":
            with rt._lock:
                if rt._raw is None:
                    rt._start(self._pipeline, None)
        return rt

    # ------------------------------------------------------------ operations
    def get_next(self, name: str | None = None) -> Any:
        """Graph tensors of the next element (nested like it); running any of them
        advances the iterator once per run."""
        leaves = flatten(self._spec)
        inputs = [] if self._handle_tensor is None else [self._handle_tensor]

        def next_element(run, values):
            rt = self._target(run.session, values[0]) if values else self._running(run.session)
            return flatten(rt.get_next())
        op = Operation(self.graph, "IteratorGetNext", name, inputs, next_element, leaves,
                       kind="stateful")
        return pack_as(self._spec, op.outputs)

    def _target(self, session, handle) -> eager.Iterator:
        if isinstance(handle, str):
            handle = handle.encode()
        if hasattr(handle, "item"):
            handle = handle.item()
        target = _handles.get(bytes(handle)) if isinstance(handle, (bytes, bytearray)) else None
        if target is None:
            raise InvalidArgumentError(f"no iterator has the string handle {handle!r}",
                                       "IteratorFromStringHandle")
        if not eager.same_types(self._spec, target._spec):
            raise InvalidArgumentError(
                f"the iterator behind handle {handle!r} yields {structure_repr(target._spec)}, "
                f"this one {structure_repr(self._spec)}", "IteratorFromStringHandle")
        return target._running(session)

    @property
    def initializer(self) -> Operation:
        """The operation that (re)starts an initializable iterator on its dataset."""
        if self._kind != "initializable":
            raise ValueError("Iterator does not have an initializer.")
        if self._initializer is None:
            self._initializer = self.make_initializer(self._dataset, name="MakeIterator")
        return self._initializer

    def make_initializer(self, dataset, name: str | None = None) -> Operation:
        """An operation that (re)starts this iterator on ``dataset`` (same structure and
        dtypes); placeholders of the dataset are fed through the run's ``feed_dict``."""
        spec = dataset.element_spec
        if not eager.same_types(self._spec, spec):
            raise TypeError(f"Expected output types {legacy_types(self._spec)} but got "
                            f"dataset with output types {legacy_types(spec)}.")
        if not specs_compatible(self._spec, spec):
            raise TypeError(f"Expected output shapes compatible with {legacy_shapes(self._spec)} "
                            f"but got dataset with output shapes {legacy_shapes(spec)}.")
        pipeline = dataset.compile()

        def start(run, values):
            self.runtime(run.session)._start(pipeline, _placeholder_feeds(run) or None)
            return []
        return Operation(self.graph, "MakeIterator", name, [], start, [], kind="stateful")

    def string_handle(self, name: str | None = None) -> Tensor:
        """A string tensor naming this iterator (what a feedable iterator is fed)."""
        if self._string_handle is None or name is not None:
            # The op holds the iterator (its graph keeps it, as TF's resource): a handle
            # taken from a temporary iterator stays valid.
            op = Operation(self.graph, "IteratorToStringHandle", name, [],
                           lambda run, values, it=self: [it._handle], [TensorSpec((), string)],
                           kind="stateful")
            if name is not None:
                return op.outputs[0]
            self._string_handle = op.outputs[0]
        return self._string_handle

    # --------------------------------------------------------- constructors
    @classmethod
    def from_structure(cls, output_types: Any, output_shapes: Any = None,
                       shared_name: str | None = None, output_classes: Any = None) -> "GraphIterator":
        """A reinitializable iterator: bind it with ``make_initializer(dataset)``."""
        return cls(eager.spec_from_types(output_types, output_shapes), kind="structure",
                   shared_name=shared_name)

    @classmethod
    def from_string_handle(cls, string_handle, output_types: Any, output_shapes: Any = None,
                           output_classes: Any = None) -> "GraphIterator":
        """A feedable iterator: ``get_next()`` reads the iterator whose handle is fed to
        ``string_handle`` (a string placeholder or tensor) in each run."""
        graph = get_default_graph()
        if isinstance(string_handle, Placeholder):
            string_handle = graph.placeholder_tensor(string_handle)
        if not isinstance(string_handle, Tensor):
            raise TypeError(f"from_string_handle: string_handle must be a string placeholder "
                            f"or tensor, got {type(string_handle).__name__}")
        return cls(eager.spec_from_types(output_types, output_shapes), graph,
                   handle=string_handle, kind="feedable")

    @classmethod
    def one_shot(cls, dataset) -> "GraphIterator":
        pipeline = dataset.compile()
        return cls(dataset.element_spec, pipeline=pipeline, kind="one_shot")

    @classmethod
    def initializable(cls, dataset, shared_name: str | None = None) -> "GraphIterator":
        return cls(dataset.element_spec, dataset=dataset, kind="initializable",
                   shared_name=shared_name)

    # ----------------------------------------------------------- save/restore
    def save(self, session) -> bytes:
        """The position of this iterator in ``session`` (``Iterator.save``'s bytes)."""
        return self._running(session).save()

    def restore(self, session, state: bytes) -> None:
        """Put this iterator of ``session`` back to a saved position. As in TF, an
        initializable (or reinitializable) iterator must have been initialized in that
        session first; a one-shot iterator starts itself."""
        rt = self._running(session)
        if rt._pipeline is None:
            raise FailedPreconditionError(
                "Failed to restore dataset iterator from checkpoint: Restore() failed because "
                "the iterator has not been initialized. Ensure that you have run the "
                "initializer operation for this iterator before restoring it.")
        rt.restore(state)


def _placeholder_feeds(run) -> dict:
    """``{nd.placeholder: value}`` of the placeholders fed in this run."""
    feeds = getattr(run, "feeds", None) or {}
    out = {}
    for tensor in run.session.graph.placeholder_tensors():
        if id(tensor) in feeds:
            out[tensor.op.placeholder] = feeds[id(tensor)]
    return out


__all__ = ["GraphIterator"]
