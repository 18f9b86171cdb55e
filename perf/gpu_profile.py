"""Where the host time of nbdata's GPU decode goes: the decode + random_resized_crop +
flip + normalize + CHW steps of perf/gpu_pipeline.py's decode part, run on this thread
under cProfile, after one untimed pass (kernels compiled, decoder made). Prints the
functions by own time and by cumulative time, and the wall time per batch beside the
device-synchronized rate. For the device check (perf/device_check.sh); on a machine
without a GPU it says so and exits 0.

    python -m perf.gpu_profile [--images 512] [--batch 64] [--top 30]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time

import numpy as np


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    from perf import gpu_pipeline as gp
    reason = gp._gpu_reason()
    if reason:
        print(f"gpu profile: skipped ({reason})")
        return 0
    from nbdata import image
    from nbdata.compiler import backend_gpu
    from nbdata.gpu import runtime
    from nbdata.primitives.jpeg import decode_jpeg
    be = runtime.backend()
    jpegs = gp.jpeg_set(args.images)
    batches = [np.array(jpegs[k:k + args.batch], dtype=object)
               for k in range(0, len(jpegs) - args.batch + 1, args.batch)]
    steps = [decode_jpeg.primitive.gpu(3),
             image.random_resized_crop.primitive.gpu((224, 224), seed=3),
             image.random_flip_left_right.primitive.gpu(4),
             image.normalize.primitive.gpu(np.array(gp.MEAN), np.array(gp.STD)),
             image.hwc_to_chw.primitive.gpu()]
    sync = gp._device_sync(be)

    def run():
        out = None
        for k, b in enumerate(batches):
            out = backend_gpu.run_steps(steps, b, k * args.batch)
        sync()
        return out

    run()   # compile, make the decoder
    t = time.perf_counter()
    run()
    wall = time.perf_counter() - t
    count = len(batches) * args.batch
    print(f"decode+augment: {count} images in {wall * 1e3:.1f} ms = {count / wall:,.0f} images/s "
          f"({wall / len(batches) * 1e3:.2f} ms per batch of {args.batch}), one thread")
    profile = cProfile.Profile()
    profile.enable()
    run()
    profile.disable()
    for key in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats(key).print_stats(args.top)
        print(f"--- by {key} (profiled pass: the profiler's own cost included)")
        print(text.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
