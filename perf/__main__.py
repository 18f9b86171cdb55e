"""Command line: `python -m perf [--quick] [--workload w1,w2,...,compile] [--repeats N] [--threads N]`."""

from __future__ import annotations

import argparse
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = ("w1", "w2", "w2_gzip", "w3", "parquet", "pack", "crc32c", "jpeg", "w4", "w5", "w6", "mix", "pymap",
             "pymap_nogil",
             "gpu", "imagenet",
             "tf1_csv", "tf1_tfrecord", "tf1_map", "distribute", "distribute_w1", "compile",
             "neighbour", "sweep")


def _parse(argv):
    from perf.environment import core_count
    parser = argparse.ArgumentParser(
        prog="python -m perf",
        description="Benchmark nbdata against a hand-written Numba kernel, NumPy, "
                    "tf.data and torch; prints one table per workload. Each row runs "
                    "in a fresh process.")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, for a smoke test of every row")
    parser.add_argument("--workload", default=",".join(WORKLOADS),
                        help=f"comma-separated subset of {','.join(WORKLOADS)} (default: all)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed epochs per row after one warm-up, best kept; rows "
                             "faster than 0.1 s get more, up to 0.5 s of timing (default 3)")
    parser.add_argument("--threads", type=int, default=core_count(),
                        help="threads for every engine (default: the cores available)")
    args = parser.parse_args(argv)
    args.workloads = [w.strip() for w in args.workload.split(",") if w.strip()]
    if "distribute" in args.workloads and "distribute_w1" not in args.workloads:
        # distribute's overhead table (one worker on w1's batches) goes with it.
        args.workloads.insert(args.workloads.index("distribute") + 1, "distribute_w1")
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(sorted(unknown))}; choose from {WORKLOADS}")
    if args.repeats < 1 or args.threads < 1:
        parser.error("--repeats and --threads must be at least 1")
    return args


def main(argv=None) -> int:
    if REPO_ROOT not in sys.path:
        sys.path.insert(0, REPO_ROOT)
    args = _parse(argv)
    from perf.environment import OtherLoad, header, set_thread_env
    set_thread_env(args.threads)
    started = time.perf_counter()
    line = header(args.threads) + f"; repeats >= {args.repeats}"
    if args.quick:
        line += "; --quick sizes"
    measured = {}  # workload -> its rows' Measurements, for a later table's compare_to
    for name in args.workloads:
        load = OtherLoad()
        if name == "compile":
            from perf import compile_time
            print(compile_time.report(line, args.quick, load), flush=True)
        elif name == "crc32c":
            from perf import crc32c_throughput
            print(crc32c_throughput.report(line, args.quick, load), flush=True)
        elif name == "gpu":
            from perf import gpu_pipeline
            print(gpu_pipeline.report(line, args.quick, load), flush=True)
        elif name == "neighbour":
            from perf import busy_neighbour
            from perf.environment import core_count
            print(busy_neighbour.report(line, args.quick, load, core_count(), args.repeats),
                  flush=True)
        elif name == "sweep":
            from perf import sweep
            print(sweep.report(line, args.quick, load), flush=True)
        elif name == "imagenet":
            from perf import imagenet
            print(imagenet.report(line, args.quick, load, args.threads, args.repeats), flush=True)
        else:
            from perf.measure import format_table
            from perf.row_process import build, run_row
            workload = build(name, args.quick)
            results = []
            for index, impl in enumerate(workload.impls):
                print(f"  {name}: {impl.name} ...", file=sys.stderr, flush=True)
                results.append(run_row(name, index, args.threads, args.repeats, args.quick))
            measured[name] = results
            compare = None
            if workload.compare_to:
                source, index, _ = workload.compare_to
                if source in measured:
                    compare = measured[source][index]
                else:  # one more row process: that table's row alone
                    impl = build(source, args.quick).impls[index]
                    print(f"  {name}: {source} {impl.name} (for {workload.compare_to[2]}) ...",
                          file=sys.stderr, flush=True)
                    compare = run_row(source, index, args.threads, args.repeats, args.quick)
            print(format_table(workload, f"{line}; {load.describe()}", results, compare),
                  flush=True)
        print(flush=True)
    print(f"total {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
