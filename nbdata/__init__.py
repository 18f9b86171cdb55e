"""nbdata: tf.data-style input pipelines compiled into fused, parallel Numba loops."""

from nbdata import errors, image, random
from nbdata.compiler.pipeline import Pipeline
from nbdata.dataset import Dataset
from nbdata.iterator import Initializer, Iterator
from nbdata.ops.node import AUTOTUNE, INFINITE, UNKNOWN
from nbdata.options import AutotuneOptions, OptimizationOptions, Options, ThreadingOptions
from nbdata.placeholder import Placeholder, placeholder
from nbdata.spec import DatasetSpec, TensorSpec, string

__version__ = "0.1.0"

__all__ = [
    "AUTOTUNE", "AutotuneOptions", "Dataset", "DatasetSpec", "INFINITE", "Initializer",
    "Iterator", "OptimizationOptions", "Options", "Pipeline", "Placeholder", "TensorSpec",
    "ThreadingOptions", "UNKNOWN", "errors", "image", "placeholder", "random", "string",
]
