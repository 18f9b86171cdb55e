"""TensorFlow's image ops on (H, W, C) NumPy images (``nd.image``), each an op-table entry,
in one file per family: ``geometry`` (crops, flips, layout), ``values`` (cast,
normalize), ``resizing``, ``boxes`` (sample_distorted_bounding_box) and ``color``.

Every op here is defined once (``nbdata.primitives.table.define``): its eager
implementation (a Numba kernel called from Python), its Numba implementation (the same
kernel, so a compiled map function calls it directly), and where it has them its scalar
lift rule and its GPU step. Inside a fused map, ops with a lift rule (crops, flips,
normalize, cast, brightness) become expressions: the fused kernel reads each output
pixel straight from the source image, with no intermediate arrays, and computes the
same values; the others (resizes, layout changes, contrast, saturation, grayscale) run
as compiled calls in the same kernel. Given TF1 graph tensors they record graph ops; in
a map after ``prefetch_to_device`` their ``nd.gpu`` forms are steps of one fused GPU
kernel (``nbdata/primitives/gpu.py``).

Randomness is counter-based: ``seed=(seed, counter)`` draws with ``nbdata.random`` from
the op's own streams, so the same seed gives the same result eagerly, fused, on the GPU
and after a restore.
"""

from nbdata.primitives.image import boxes, color, geometry, resizing, values
from nbdata.primitives.table import namespace

globals().update(namespace("image", boxes, color, geometry, resizing, values))
