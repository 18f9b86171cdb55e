"""The generated kernels compile for a real GPU (PTX for sm_90 through numba-cuda and
NVVM, no GPU needed): float32, float16 and bfloat16 outputs, uniform and ragged batches,
with 32-bit divisions and no 64-bit division. Skipped where CUDA's NVVM is not installed."""

import os
import subprocess
import sys

import pytest

PROBE = r'''
import sys, types as pytypes
import numpy as np
from nbdata.gpu import runtime
runtime._numpy_names_for_numba_cuda()   # NumPy 2.5 dropped np.row_stack; numba-cuda needs it
from numba import cuda, types
import numba.cuda.dispatcher as dispatcher
try:
    from numba.cuda.cudadrv import nvvm
    nvvm.NVVM()
except Exception as e:
    print("NO NVVM", type(e).__name__); sys.exit(0)
# device functions ask the current device for its compute capability: say sm_90
dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))
from nbdata import image
from nbdata.compiler import backend_gpu
from nbdata.compiler.emit import materialize
from nbdata.primitives.gpu import Chain
mean, std = np.array([1.0, 2, 3]), np.array([4.0, 5, 6])
def ptx(chain):
    text, glb = backend_gpu.kernel_source(chain)
    fn = materialize("kernel", text, dict(glb, cuda=cuda), "gpu-chain")
    return cuda.compile_ptx(fn, backend_gpu.kernel_signature(chain), cc=(9, 0))[0]
try:
    ptx(Chain([image.normalize.primitive.gpu(mean, std)], (4, 4, 3), np.uint8))
except Exception as e:
    if "nvrtc" in str(e).lower():      # NVVM without NVRTC (the CUDA 12/13 pip wheels differ)
        print("NO NVVM", type(e).__name__); sys.exit(0)
    raise
for label, dt in (("float32", None), ("float16", np.float16), ("bfloat16", "bfloat16")):
    steps = [image.random_crop.primitive.gpu((224, 224), 1), image.random_flip_left_right.primitive.gpu(2),
             image.normalize.primitive.gpu(mean, std)]
    steps += ([image.cast.primitive.gpu(dt)] if dt is not None else []) + [image.hwc_to_chw.primitive.gpu()]
    code = ptx(Chain(steps, (256, 256, 3), np.uint8))
    print(label, "div64", code.count("div.s64") + code.count("div.u64") + code.count("mul.hi.s64"),
          "narrow", code.count("mul.wide.u32") + code.count("mul.wide.u16"),
          "st16", code.count("st.global.u16"), "ldf32", code.count("ld.global.f32"),
          "params", code.split(")", 1)[0].count(".param"))
steps = [image.random_resized_crop.primitive.gpu((224, 224), seed=3), image.normalize.primitive.gpu(mean, std)]
code = ptx(Chain(steps, (None, None, 3), np.uint8))
print("ragged div64", code.count("div.s64") + code.count("div.u64") + code.count("mul.hi.s64"))
'''


def test_kernels_compile_to_ptx_with_32_bit_divisions(gpu_backend):
    if gpu_backend is not None:
        pytest.skip("compiles for a real GPU in a process of its own: runs once")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         timeout=300, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                             os.path.abspath(__file__)))))
    if "NO NVVM" in out.stdout:
        pytest.skip("CUDA's NVVM is not installed here")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    for dt in ("float32", "float16", "bfloat16"):
        counts = lines[dt].split()
        # the divisions by the output's dims are 32-bit (or narrower) multiplies, never
        # 64-bit divisions
        assert counts[1] == "0" and int(counts[3]) >= 1, lines[dt]
        # normalize's 3 means and 3 deviations are loaded once per image, not per value
        assert counts[7] == "6", lines[dt]
        # 3 arrays (batch, output, the one parameter buffer: 7 words each), the batch
        # size and the 5 parameter arrays' offsets in the buffer
        assert counts[9] == str(3 * 7 + 1 + 5), lines[dt]
    assert int(lines["float16"].split()[5]) >= 1    # 16-bit stores
    assert int(lines["bfloat16"].split()[5]) >= 1
    assert lines["ragged"] == "div64 0"
