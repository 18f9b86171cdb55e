"""nbdata: tf.data-style input pipelines compiled into fused, parallel Numba loops."""

from nbdata import errors, experimental, image, io, random, train
from nbdata.checkpoint import Checkpoint
from nbdata.compiler.pipeline import Pipeline
from nbdata.dataset import Dataset
from nbdata.io.datasets import FixedLengthRecordDataset, TFRecordDataset, TextLineDataset
from nbdata.iterator import Initializer, Iterator
from nbdata.ops.node import AUTOTUNE, INFINITE, UNKNOWN
from nbdata.options import AutotuneOptions, OptimizationOptions, Options, ThreadingOptions
from nbdata.placeholder import Placeholder, placeholder
from nbdata.sparse import SparseTensor, SparseTensorSpec
from nbdata.spec import DatasetSpec, TensorSpec, string
from nbdata.train.saver import make_saveable_from_iterator

__version__ = "0.1.0"

__all__ = [
    "AUTOTUNE", "AutotuneOptions", "Checkpoint", "Dataset", "DatasetSpec",
    "FixedLengthRecordDataset", "INFINITE", "SparseTensor", "SparseTensorSpec",
    "TFRecordDataset", "TextLineDataset",
    "Initializer", "Iterator", "OptimizationOptions", "Options", "Pipeline", "Placeholder",
    "TensorSpec", "ThreadingOptions", "UNKNOWN", "errors", "experimental", "image", "io",
    "make_saveable_from_iterator", "placeholder", "random", "string", "train",
]
