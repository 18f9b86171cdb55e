"""``nd.train``: TF1's queue-based input pipeline (producers, batchers, queue runners, the
Coordinator), ``py_func``, ``explain``, and ``Saver`` for iterator state."""

from nbdata.train.coordinator import Coordinator
from nbdata.train.graph import GraphKeys
from nbdata.train import iterators  # noqa: F401 - registers graph-mode Dataset iterators
from nbdata.train.input import (batch, batch_join, input_producer, limit_epochs,
                                match_filenames_once, maybe_batch, maybe_batch_join,
                                maybe_shuffle_batch, maybe_shuffle_batch_join,
                                range_input_producer, shuffle_batch, shuffle_batch_join,
                                slice_input_producer, string_input_producer)
from nbdata.train.lowering import explain
from nbdata.train.ops import py_func
from nbdata.train.queue_runner import QueueRunner, add_queue_runner, start_queue_runners
from nbdata.train.saver import Saver
from nbdata.train.variables import Variable

__all__ = [
    "Coordinator", "GraphKeys", "QueueRunner", "Saver", "Variable", "add_queue_runner", "batch",
    "batch_join", "explain", "input_producer", "limit_epochs", "match_filenames_once",
    "maybe_batch", "maybe_batch_join", "maybe_shuffle_batch", "maybe_shuffle_batch_join",
    "py_func", "range_input_producer", "shuffle_batch", "shuffle_batch_join",
    "slice_input_producer", "start_queue_runners", "string_input_producer",
]
