"""TF1's input-pipeline functions (``tf.train`` "Input pipeline"): producers that fill a
queue with work (file names, indices, slices) epoch after epoch, and batchers that
fill a batching queue from one or several lists of tensors, each with the queue
runner that keeps it filled."""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from nbdata import random as nd_random
from nbdata.errors import InvalidArgumentError, OutOfRangeError, UnimplementedError
from nbdata.kernels.batching import batch_sparse
from nbdata.spec import SparseTensorSpec, TensorShape, TensorSpec, string
from nbdata.train.graph import GraphKeys
from nbdata.trace.graph import Operation, Tensor, as_tensor, constant, get_default_graph, is_symbolic, name_scope, record
from nbdata.train.queue_runner import QueueRunner, add_queue_runner
from nbdata.train.queues import FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue, _objects
from nbdata.train.variables import Variable


# ----------------------------------------------------------------- producers

def match_filenames_once(pattern, name: str | None = None) -> Tensor:
    """The sorted file names matching ``pattern`` (a glob, or a list of globs), found
    once when the local variables are initialized (``tf.train.match_filenames_once``)."""
    patterns = [pattern] if isinstance(pattern, (str, bytes, os.PathLike)) else list(pattern)
    patterns = [os.fsdecode(p) for p in patterns]
    graph = get_default_graph()

    def find(run, values):
        names = sorted({f for p in patterns for f in glob.glob(p)})
        return [_objects([os.fsencode(f) for f in names])]
    found = Operation(graph, "MatchingFiles", "MatchingFiles", [], find,
                      [TensorSpec(None, string)], kind="stateful").outputs[0]
    var = Variable(found, name=name or "matching_filenames",
                   collections=[GraphKeys.LOCAL_VARIABLES])
    return var.value()


def limit_epochs(tensor, num_epochs: int | None = None, name: str | None = None) -> Tensor:
    """``tensor``, which may be evaluated ``num_epochs`` times; the next evaluation raises
    OutOfRangeError (``tf.train.limit_epochs``). The count is a local variable: run
    ``nd.local_variables_initializer()`` first."""
    tensor = as_tensor(tensor)
    if num_epochs is None:
        return tensor
    num_epochs = int(num_epochs)
    if num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0 not {num_epochs}.")
    graph = tensor.graph
    with graph.name_scope(name or "limit_epochs"):
        counter = Variable(np.int64(0), name="epochs", collections=[GraphKeys.LOCAL_VARIABLES])

        def count(run, values):
            old = counter.update(run, lambda c: c + 1 if c < num_epochs else c)
            if old >= num_epochs:
                raise OutOfRangeError(f"Reached limit of {num_epochs}", counter.name)
            return [values[0]]
        return Operation(graph, "CountUpTo", "limit_epochs", [tensor], count, [tensor.spec],
                         kind="stateful").outputs[0]


def _shuffled(tensor: Tensor, seed) -> Tensor:
    """``tensor`` with its rows in a new random order at each evaluation (keyed on the
    seed and the number of evaluations so far in the session)."""
    op_seed = nd_random.op_seed(seed)

    def shuffle(run, values):
        state = run.session.resource(op, lambda: {"count": 0, "seed": op_seed if op_seed is not None
                                                   else int.from_bytes(os.urandom(8), "little") >> 1})
        with run.session._lock:
            count = state["count"]
            state["count"] += 1
        rng = np.random.default_rng([state["seed"], count])
        return [values[0][rng.permutation(len(values[0]))]]
    op = Operation(tensor.graph, "RandomShuffle", "RandomShuffle", [tensor], shuffle,
                   [tensor.spec], kind="stateful")
    return op.outputs[0]


def input_producer(input_tensor, element_shape=None, num_epochs: int | None = None,
                   shuffle: bool = True, seed=None, capacity: int = 32, shared_name=None,
                   summary_name=None, name: str | None = None, cancel_op=None) -> FIFOQueue:
    """A queue filled with the rows of ``input_tensor``, ``num_epochs`` times (forever
    when None), each epoch reshuffled when ``shuffle`` (``tf.train.input_producer``).
    A QueueRunner filling it is added to the graph; ``cancel_op`` replaces its default
    cancel op. ``summary_name`` names TF1's TensorBoard summary of how full the queue
    is; nbdata writes no summaries, so it only documents the call."""
    graph = get_default_graph()
    with graph.name_scope(name or "input_producer"):
        input_tensor = as_tensor(input_tensor)
        shape = input_tensor.shape
        element = shape[1:] if shape.dims is not None else TensorShape(None)
        if element_shape is not None:
            element = element.merge_with(TensorShape(element_shape))
        if not element.is_fully_defined():
            raise ValueError("Either `input_tensor` must have a fully defined shape or "
                             "`element_shape` must be specified")
        if shuffle:
            input_tensor = _shuffled(input_tensor, seed)
        input_tensor = limit_epochs(input_tensor, num_epochs)
        # Named by the caller's scope ('input_producer' for string_input_producer), else
        # 'input_producer/FIFOQueueV2', as in TF1.
        queue = FIFOQueue(capacity, [input_tensor.dtype], shapes=[element],
                          shared_name=shared_name, name=name if name else "FIFOQueueV2")
        enqueue = queue.enqueue_many([input_tensor])
    add_queue_runner(QueueRunner(queue, [enqueue], cancel_op=cancel_op,
                                 queue_closed_exception_types=(OutOfRangeError,)))
    return queue


def string_input_producer(string_tensor, num_epochs: int | None = None, shuffle: bool = True,
                          seed=None, capacity: int = 32, shared_name=None, name: str | None = None,
                          cancel_op=None) -> FIFOQueue:
    """A queue of strings (usually file names for a reader), ``num_epochs`` times over,
    shuffled each epoch when ``shuffle`` (``tf.train.string_input_producer``).

    >>> import nbdata as nd
    >>> with nd.Graph().as_default():
    ...     q = nd.train.string_input_producer([b"a", b"b"], num_epochs=2, shuffle=False)
    ...     name = q.dequeue()
    ...     with nd.Session() as sess:
    ...         sess.run(nd.local_variables_initializer())
    ...         coord = nd.train.Coordinator()
    ...         threads = nd.train.start_queue_runners(sess, coord)
    ...         print([sess.run(name) for _ in range(4)])
    ...         coord.request_stop(); coord.join(threads)
    [b'a', b'b', b'a', b'b']
    """
    with name_scope(name or "input_producer") as scope:
        if not isinstance(string_tensor, Tensor) and not is_symbolic(string_tensor):
            values = list(np.asarray(string_tensor, dtype=object).reshape(-1))
            if not values:
                raise ValueError("string_input_producer requires a non-null input tensor")
            for v in values:
                if not isinstance(v, (bytes, str)):
                    raise TypeError(f"Expected string, but got {v!r} of type '{type(v).__name__}'.")
            string_tensor = constant(values, dtype=string)
        tensor = as_tensor(string_tensor)
        if tensor.dtype is not string:
            raise TypeError(f"Expected string, but got {tensor.name} of dtype "
                            f"{getattr(tensor.dtype, 'name', tensor.dtype)}.")

        def not_empty(value):
            if len(value) == 0:
                raise InvalidArgumentError("assertion failed: [string_input_producer requires a "
                                           "non-null input tensor]")
            return value
        tensor = Operation(tensor.graph, "Assert", "Assert", [tensor], not_empty,
                           [tensor.spec]).outputs[0]
        return input_producer(tensor, [], num_epochs, shuffle, seed, capacity, shared_name,
                              "fraction_of_%d_full" % capacity, scope, cancel_op)


def range_input_producer(limit: int, num_epochs: int | None = None, shuffle: bool = True, seed=None,
                         capacity: int = 32, shared_name=None, name: str | None = None) -> FIFOQueue:
    """A queue of the int32 integers ``0 .. limit - 1``, ``num_epochs`` times over
    (``tf.train.range_input_producer``)."""
    with name_scope(name or "input_producer") as scope:
        values = record(lambda n: np.arange(n, dtype=np.int32), (as_tensor(limit),), {}, "range") \
            if is_symbolic(limit) else constant(np.arange(int(limit), dtype=np.int32))
        return input_producer(values, [], num_epochs, shuffle, seed, capacity, shared_name,
                              None, scope)


def slice_input_producer(tensor_list, num_epochs: int | None = None, shuffle: bool = True,
                         seed=None, capacity: int = 32, shared_name=None,
                         name: str | None = None) -> list:
    """One row of each tensor of ``tensor_list`` per run, the same row index for all,
    ``num_epochs`` times over (``tf.train.slice_input_producer``); returns a list."""
    tensors = [as_tensor(t) for t in tensor_list]
    if not tensors:
        raise ValueError("Expected at least one tensor in slice_input_producer().")
    with name_scope(name or "input_producer"):
        # The first tensor's rows, as in TF1 (a shorter tensor fails when its row is read).
        first = tensors[0].shape.dims
        limit = (first[0] if first and first[0] is not None
                 else record(lambda t: np.int32(len(t)), (tensors[0],), {}, "Shape"))
        queue = range_input_producer(limit, num_epochs, shuffle, seed, capacity, shared_name)
        index = queue.dequeue()
        return [record(lambda t, i: t[i], (t, index), {}, "Gather") for t in tensors]


# ------------------------------------------------------------------ batching

def _as_list(tensors: Any) -> list:
    if isinstance(tensors, Mapping):
        return [tensors[k] for k in sorted(tensors)]
    if isinstance(tensors, (Tensor,)) or not isinstance(tensors, (list, tuple)):
        raise TypeError("Iterating over a symbolic `nd.Tensor` is not allowed: pass a list (or a "
                        "dict) of tensors to batch")
    return list(tensors)


def _store_sparse(tensor_list: list, enqueue_many: bool) -> tuple[list, list]:
    """Sparse tensors enqueued as one object per element (a string-typed component), and
    for each component the spec to restore after the dequeue (None: dense)."""
    out, sparse = [], []
    for t in tensor_list:
        spec = t.spec if isinstance(t.spec, SparseTensorSpec) else None
        if spec is not None:
            if enqueue_many:
                raise UnimplementedError("batching sparse tensors with enqueue_many=True is not "
                                         "supported; enqueue them one element at a time")
            t = Operation(t.graph, "SparseToQueue", "SparseToQueue", [t], lambda v: v,
                          [TensorSpec((), string)]).outputs[0]
        out.append(t)
        sparse.append(spec)
    return out, sparse


def _restore_sparse(dequeued: Any, sparse: list, batch_dim, what: str) -> Any:
    """The dequeued components, each boxed sparse column batched into one SparseTensor."""
    if not any(sparse):
        return dequeued
    items = dequeued if isinstance(dequeued, list) else [dequeued]
    out = []
    for k, (t, spec) in enumerate(zip(items, sparse)):
        if spec is not None:
            shape = None if spec.shape is None else (batch_dim,) + tuple(spec.shape)
            t = Operation(t.graph, "SparseFromQueue", "SparseFromQueue", [t],
                          lambda column, k=k: batch_sparse(list(column), k, what),
                          [SparseTensorSpec(shape, spec.dtype)]).outputs[0]
        out.append(t)
    return out if isinstance(dequeued, list) else out[0]


def _as_original_type(original: Any, dequeued: Any) -> Any:
    if isinstance(original, Mapping):
        if len(original) == 1:
            dequeued = [dequeued]
        return {k: dequeued[i] for i, k in enumerate(sorted(original))}
    return dequeued


def _validate(tensor_list: list, what: str) -> list:
    if not tensor_list:
        raise ValueError(f"Expected at least one tensor in {what}().")
    out = []
    for t in tensor_list:
        if isinstance(t, (list, tuple)) and any(isinstance(v, Tensor) for v in t):
            raise TypeError(f"{what}: each element of the list must be a tensor; got a nested "
                            f"{type(t).__name__} (flatten it first)")
        out.append(as_tensor(t))
    return out


def _validate_keep_input(keep_input, enqueue_many: bool):
    if isinstance(keep_input, (bool, np.bool_)):
        return bool(keep_input)
    keep = as_tensor(keep_input)
    if keep.dtype != np.bool_:
        raise TypeError(f"keep_input must be a bool tensor, got {getattr(keep.dtype, 'name', keep.dtype)}")
    ndims = keep.shape.ndims
    if ndims is None:
        raise ValueError("`keep_input` dimensions must be known at graph construction.")
    if not enqueue_many and ndims == 1:
        raise ValueError("`keep_input` cannot be a vector when `enqueue_many=False`.")
    if ndims > 1:
        raise ValueError("`keep_input` must be 0 or 1 dimensions.")
    return keep


def _shapes(tensor_list_list: list, shapes, enqueue_many: bool) -> list:
    if shapes is not None:
        return [TensorShape(s) for s in shapes]
    for t in (t for tl in tensor_list_list for t in tl):
        if t.shape.ndims is None:
            raise ValueError(f"Cannot infer Tensor's rank: {t}")
    out = []
    for i in range(len(tensor_list_list[0])):
        merged = None
        for tl in tensor_list_list:
            shape = tl[i].shape
            if enqueue_many:
                if shape.ndims == 0:
                    raise ValueError("Shape () must have rank at least 1")
                shape = shape[1:]
            merged = shape if merged is None else merged.merge_with(shape)
        out.append(merged)
    return out


def _check_enqueue_many_sizes(tensor_list: list) -> None:
    sizes = {t.shape[0] for t in tensor_list if t.shape.ndims}
    sizes.discard(None)
    if len(sizes) > 1:
        a, b = sorted(sizes)[:2]
        raise ValueError(f"Dimensions {a} and {b} are not compatible")


def _dtypes(tensor_list_list: list) -> list:
    types = [t.dtype for t in tensor_list_list[0]]
    for tl in tensor_list_list[1:]:
        if len(tl) != len(types):
            raise ValueError("Expected the same number of tensors in each list of tensors_list")
        if [t.dtype for t in tl] != types:
            raise TypeError(f"Expected types {types} in each list of tensors_list, got "
                            f"{[t.dtype for t in tl]}")
    return types


def _enqueue_op(queue, tensor_list: list, enqueue_many: bool, keep) -> Operation | None:
    """The enqueue op of one list of tensors (``keep``: a Python bool, or a bool tensor,
    scalar — enqueue or not — or, with enqueue_many, a vector choosing rows)."""
    if keep is False:
        return Operation(queue.graph, "NoOp", "NoOp", [], None, [], kind="stateful")
    if isinstance(keep, Tensor) and keep.shape.ndims == 1:
        def select(k, *values):
            if len(k) != len(values[0]):
                raise InvalidArgumentError(f"keep_input has {len(k)} rows, the inputs "
                                           f"{len(values[0])}")
            return tuple(v[k] for v in values)
        if all(t.shape.ndims and t.shape[0] is not None for t in tensor_list) and keep.shape[0] is not None:
            if keep.shape[0] != tensor_list[0].shape[0]:
                raise ValueError(f"Dimensions must be equal, but are {tensor_list[0].shape[0]} and "
                                 f"{keep.shape[0]} for keep_input and the batched tensors")
        tensor_list = list(record(select, (keep, *tensor_list), {}, "DynamicPartition"))
        keep = True
    op = queue.enqueue_many(tensor_list) if enqueue_many else queue.enqueue(tensor_list)
    if isinstance(keep, Tensor):   # a scalar: enqueue the element (or the batch) or not
        inner = op.fn

        def maybe(run, values):
            if values[0]:
                inner(run, values[1:])
        op.inputs.insert(0, keep)
        op.fn = maybe
        op.keep = True
    return op


def _batch_impl(what: str, tensors_list: list, originals: Any, batch_size, num_threads,
                keep_input, capacity, enqueue_many, shapes, dynamic_pad, allow_smaller_final_batch,
                shared_name, name, min_after_dequeue=None, seed=None):
    """What every batcher does: validate, make the queue, one enqueue op per list of
    tensors (``num_threads`` threads each; the joins pass 1), the runner, and the
    dequeue of a batch."""
    threads = int(num_threads)
    if threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    with name_scope(name or what):
        lists = [_validate(_as_list(t), what) for t in tensors_list]
        keep = _validate_keep_input(keep_input, enqueue_many)
        if enqueue_many:
            for tl in lists:
                _check_enqueue_many_sizes(tl)
        stored = [_store_sparse(tl, enqueue_many) for tl in lists]
        lists = [tl for tl, _ in stored]
        sparse = stored[0][1]
        types = _dtypes(lists)
        queue_shapes = _shapes(lists, shapes, enqueue_many)
        if not dynamic_pad and not all(s.is_fully_defined() for s in queue_shapes):
            raise ValueError(f"All shapes must be fully defined: {queue_shapes}")
        dims = [s.dims for s in queue_shapes]
        if min_after_dequeue is not None:
            queue = RandomShuffleQueue(capacity, min_after_dequeue, types, dims, seed=seed,
                                       shared_name=shared_name)
        else:
            queue = (PaddingFIFOQueue if dynamic_pad else FIFOQueue)(capacity, types, dims,
                                                                     shared_name=shared_name)
        ops = [_enqueue_op(queue, tl, enqueue_many, keep) for tl in lists] * threads
        add_queue_runner(QueueRunner(queue, ops))
        dequeued = (queue.dequeue_up_to(batch_size) if allow_smaller_final_batch
                    else queue.dequeue_many(batch_size))
        batch_dim = None if allow_smaller_final_batch or isinstance(batch_size, Tensor) else int(batch_size)
        return _as_original_type(originals, _restore_sparse(dequeued, sparse, batch_dim, what))


def batch(tensors, batch_size, num_threads: int = 1, capacity: int = 32, enqueue_many: bool = False,
          shapes=None, dynamic_pad: bool = False, allow_smaller_final_batch: bool = False,
          shared_name=None, name: str | None = None):
    """Batches of ``batch_size`` elements of ``tensors`` (a list or dict of tensors)
    through a FIFO queue filled by ``num_threads`` threads (``tf.train.batch``).

    ``enqueue_many``: each tensor holds a batch of elements along dimension 0.
    ``dynamic_pad``: shapes may have unknown dims, padded per batch (a PaddingFIFOQueue).
    ``allow_smaller_final_batch``: the last batch may be short (its static batch dim is
    None). Returns the same structure as ``tensors`` (a one-element list: the tensor).

    >>> import numpy as np, nbdata as nd
    >>> with nd.Graph().as_default():
    ...     i = nd.train.range_input_producer(5, num_epochs=1, shuffle=False).dequeue()
    ...     b = nd.train.batch([i * 10], batch_size=2, allow_smaller_final_batch=True)
    ...     with nd.Session() as sess:
    ...         sess.run(nd.local_variables_initializer())
    ...         coord = nd.train.Coordinator()
    ...         threads = nd.train.start_queue_runners(sess, coord)
    ...         print([sess.run(b).tolist() for _ in range(3)])
    ...         coord.request_stop(); coord.join(threads)
    [[0, 10], [20, 30], [40]]
    """
    return _batch_impl("batch", [tensors], tensors, batch_size, num_threads, True,
                       capacity, enqueue_many, shapes, dynamic_pad, allow_smaller_final_batch,
                       shared_name, name)


def maybe_batch(tensors, keep_input, batch_size, num_threads: int = 1, capacity: int = 32,
                enqueue_many: bool = False, shapes=None, dynamic_pad: bool = False,
                allow_smaller_final_batch: bool = False, shared_name=None, name: str | None = None):
    """:func:`batch` of the elements for which ``keep_input`` holds (a bool scalar, or
    with ``enqueue_many`` a vector choosing rows)."""
    return _batch_impl("batch", [tensors], tensors, batch_size, num_threads,
                       keep_input, capacity, enqueue_many, shapes, dynamic_pad,
                       allow_smaller_final_batch, shared_name, name)


def batch_join(tensors_list, batch_size, capacity: int = 32, enqueue_many: bool = False,
               shapes=None, dynamic_pad: bool = False, allow_smaller_final_batch: bool = False,
               shared_name=None, name: str | None = None):
    """Batches of elements from several lists of tensors of the same types, one thread
    enqueueing each list (``tf.train.batch_join``)."""
    return _batch_impl("batch_join", list(tensors_list), tensors_list[0], batch_size, 1, True,
                       capacity, enqueue_many, shapes, dynamic_pad, allow_smaller_final_batch,
                       shared_name, name)


def maybe_batch_join(tensors_list, keep_input, batch_size, capacity: int = 32,
                     enqueue_many: bool = False, shapes=None, dynamic_pad: bool = False,
                     allow_smaller_final_batch: bool = False, shared_name=None,
                     name: str | None = None):
    """:func:`batch_join` of the elements for which ``keep_input`` holds."""
    return _batch_impl("batch_join", list(tensors_list), tensors_list[0], batch_size, 1,
                       keep_input, capacity, enqueue_many, shapes, dynamic_pad,
                       allow_smaller_final_batch, shared_name, name)


def shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, num_threads: int = 1,
                  seed=None, enqueue_many: bool = False, shapes=None,
                  allow_smaller_final_batch: bool = False, shared_name=None,
                  name: str | None = None):
    """Batches of ``batch_size`` elements drawn at random from a RandomShuffleQueue of
    ``capacity`` that keeps at least ``min_after_dequeue`` elements until the input
    ends (``tf.train.shuffle_batch``)."""
    return _batch_impl("shuffle_batch", [tensors], tensors, batch_size, num_threads,
                       True, capacity, enqueue_many, shapes, False, allow_smaller_final_batch,
                       shared_name, name, min_after_dequeue, seed)


def maybe_shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, keep_input,
                        num_threads: int = 1, seed=None, enqueue_many: bool = False, shapes=None,
                        allow_smaller_final_batch: bool = False, shared_name=None,
                        name: str | None = None):
    """:func:`shuffle_batch` of the elements for which ``keep_input`` holds."""
    return _batch_impl("shuffle_batch", [tensors], tensors, batch_size, num_threads,
                       keep_input, capacity, enqueue_many, shapes, False,
                       allow_smaller_final_batch, shared_name, name, min_after_dequeue, seed)


def shuffle_batch_join(tensors_list, batch_size, capacity, min_after_dequeue, seed=None,
                       enqueue_many: bool = False, shapes=None,
                       allow_smaller_final_batch: bool = False, shared_name=None,
                       name: str | None = None):
    """:func:`shuffle_batch` over several lists of tensors, one thread each
    (``tf.train.shuffle_batch_join``)."""
    return _batch_impl("shuffle_batch_join", list(tensors_list), tensors_list[0], batch_size, 1,
                       True, capacity, enqueue_many, shapes, False, allow_smaller_final_batch,
                       shared_name, name, min_after_dequeue, seed)


def maybe_shuffle_batch_join(tensors_list, batch_size, capacity, min_after_dequeue, keep_input,
                             seed=None, enqueue_many: bool = False, shapes=None,
                             allow_smaller_final_batch: bool = False, shared_name=None,
                             name: str | None = None):
    """:func:`shuffle_batch_join` of the elements for which ``keep_input`` holds."""
    return _batch_impl("shuffle_batch_join", list(tensors_list), tensors_list[0], batch_size, 1,
                       keep_input, capacity, enqueue_many, shapes, False,
                       allow_smaller_final_batch, shared_name, name, min_after_dequeue, seed)


__all__ = ["batch", "batch_join", "input_producer", "limit_epochs", "match_filenames_once",
           "maybe_batch", "maybe_batch_join", "maybe_shuffle_batch", "maybe_shuffle_batch_join",
           "range_input_producer", "shuffle_batch", "shuffle_batch_join", "slice_input_producer",
           "string_input_producer"]
