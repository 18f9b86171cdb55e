"""nbdata: tf.data-style input pipelines compiled into fused, parallel Numba loops.

How the package is built, lowest layer first (a module imports only its own layer and
the ones before it; ``tests/test_layers.py`` checks every import):

- vocabulary: ``errors``, ``options`` (and the disk cache directory), ``spec`` (element
  specs, ``TensorShape``, sparse tensors), ``random`` (counter-based draws), ``chunks``
  (the columns rows travel in);
- ``kernels``: Numba CPU kernels shared by everything above (file reading, CRC32C,
  protobuf and CSV scanning, batching, the one thread budget);
- ``gpu``: the GPU runtime (device and pinned memory, streams, ``DeviceArray``);
- ``trace``: the one recorder. ``nd.Tensor`` records NumPy operators, ufuncs, array
  functions, methods, indexing and primitives into a graph: a TF1 graph, or a user
  function recorded once (``trace.function.FunctionGraph``);
- ``primitives``: the one op table. Each primitive (``nd.image`` ops, ``nd.io``
  decoders, NumPy's lifting entries, ``nd.gpu`` batch ops) is defined once with its
  eager, spec, Numba, lift, GPU and column-decoder rules (``primitives.table``);
- ``ops``, ``iterator``, ``checkpoint``: one node per transformation with its spec
  rule and its chunk iterator (every iterator saves and restores its state); element
  iteration is a view over chunks;
- ``compiler``: passes over plans and recorded graphs, the planner, the one code
  emitter (``compiler.emit``), the CPU and GPU backends and the executor;
- ``dataset`` and ``io``: the API;
- ``distribute`` (Ray) and ``train`` (TF1 graphs, sessions, queues, readers) on top.

README.md's "How to add an op" says which files a new primitive, transformation or
file format touches.
"""

# First: where nbdata's own Numba kernels are cached (before any of them is defined).
from nbdata import options  # noqa: F401, I001
from nbdata import errors, experimental, gpu, image, io, random, train
from nbdata.checkpoint import Checkpoint
from nbdata.compiler.pipeline import Pipeline
from nbdata.dataset import Dataset
from nbdata.io.datasets import FixedLengthRecordDataset, TFRecordDataset, TextLineDataset
from nbdata.iterator import Initializer, Iterator
from nbdata.ops.node import AUTOTUNE, INFINITE, UNKNOWN
from nbdata.options import AutotuneOptions, OptimizationOptions, Options, ThreadingOptions
from nbdata.trace.placeholder import Placeholder, placeholder
from nbdata.spec import SparseTensor, SparseTensorSpec
from nbdata.ragged import RaggedTensor, RaggedTensorSpec
from nbdata.spec import DatasetSpec, TensorSpec, string
from nbdata.train.graph import GraphKeys
from nbdata.trace.graph import Graph, Operation, Tensor, constant, get_default_graph, name_scope, reset_default_graph
from nbdata.spec import TensorShape
from nbdata.train.ops import py_func
from nbdata.train.queues import FIFOQueue, PaddingFIFOQueue, QueueBase, RandomShuffleQueue
from nbdata.train.readers import (FixedLengthRecordReader, IdentityReader, ReaderBase,
                                  TFRecordReader, TextLineReader, WholeFileReader)
from nbdata.train.saver import make_saveable_from_iterator
from nbdata.train.session import (ConfigProto, InteractiveSession, RunOptions, Session,
                                  get_default_session)
from nbdata.train.variables import global_variables_initializer, local_variables_initializer

__version__ = "0.1.0"

__all__ = [
    "AUTOTUNE", "AutotuneOptions", "Checkpoint", "Dataset", "DatasetSpec",
    "RaggedTensor", "RaggedTensorSpec",
    "FixedLengthRecordDataset", "INFINITE", "SparseTensor", "SparseTensorSpec",
    "TFRecordDataset", "TextLineDataset",
    "Initializer", "Iterator", "OptimizationOptions", "Options", "Pipeline", "Placeholder",
    "TensorSpec", "ThreadingOptions", "UNKNOWN", "errors", "experimental", "gpu", "image", "io",
    "make_saveable_from_iterator", "placeholder", "random", "string", "train",
    # TF1 graphs, sessions, queues and readers (nd.train holds the input functions)
    "ConfigProto", "FIFOQueue", "FixedLengthRecordReader", "Graph", "GraphKeys",
    "IdentityReader", "InteractiveSession", "Operation", "PaddingFIFOQueue", "QueueBase",
    "RandomShuffleQueue", "ReaderBase", "RunOptions", "Session", "TFRecordReader", "Tensor",
    "TensorShape", "TextLineReader", "WholeFileReader", "constant", "get_default_graph",
    "get_default_session", "global_variables_initializer", "local_variables_initializer",
    "name_scope", "py_func", "reset_default_graph",
]
