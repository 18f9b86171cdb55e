"""``python -m nbdata demo``: build a small dataset, run a fused pipeline, print plan and speed.
``python -m nbdata inspect FILE``: record count and first Examples of a TFRecord/text file."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import nbdata as nd


def demo(rows: int) -> None:
    rng = np.random.default_rng(0)
    features = rng.random((rows, 16), dtype=np.float32)
    labels = rng.integers(0, 10, size=rows)
    print(f"nbdata {nd.__version__}: {rows:,} rows of 16 float32 features + an int64 label\n")

    started = time.perf_counter()
    ds = (nd.Dataset.from_tensor_slices((features, labels))
          .map(lambda x, y: ((x - 0.5) * 2.0, y))
          .filter(lambda x, y: y != 3)
          .shuffle(10_000, seed=0)
          .batch(256))
    pipe = ds.compile()
    compiled = time.perf_counter() - started
    print(pipe.explain())
    print(f"\ncompile: {compiled:.2f} s")

    for title, pipeline in (("map/filter/shuffle/batch", pipe),
                            ("map/filter/batch (one fused stage)",
                             nd.Dataset.from_tensor_slices((features, labels))
                             .map(lambda x, y: ((x - 0.5) * 2.0, y))
                             .filter(lambda x, y: y != 3).batch(256).compile())):
        best, kept = float("inf"), 0
        for _ in range(3):
            started = time.perf_counter()
            kept = sum(len(y) for _, y in pipeline)
            best = min(best, time.perf_counter() - started)
        print(f"{title:40s} {rows / best / 1e6:8.2f} M elements/s  ({kept:,} kept, {best * 1e3:.0f} ms)")


def profile_script(script: str, args: list[str], output: str | None) -> int:
    """Runs ``script`` as ``__main__`` (with ``args``) while a trace records, then writes
    the trace and says where; the exit status is the script's."""
    import os
    import runpy

    from nbdata import profiler
    output = output or os.path.splitext(os.path.basename(script))[0] + ".trace.json"
    status = 0
    saved = sys.argv
    sys.argv = [script] + list(args)
    trace = profiler.start(output)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = saved
        profiler.stop()
    slices = sum(1 for e in trace.events if e["ph"] == "X")
    print(f"nbdata profile: {slices:,} slices on {len(trace.threads)} threads, consumers "
          f"waited {trace.waits():.3f} s for input; trace written to {output} (open it in "
          f"ui.perfetto.dev or chrome://tracing)", file=sys.stderr)
    return status


def script_options(args: list[str], output: str | None) -> tuple[str | None, list[str]]:
    """``profile``'s options given after the script's name: ``-o FILE``,
    ``--output FILE`` and ``--output=FILE`` up to a ``--`` name the trace file (the
    last one wins); the rest, and everything after the ``--``, are the script's."""
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i + 1:]
            break
        if arg in ("-o", "--output"):
            if i + 1 >= len(args):
                raise SystemExit(f"python -m nbdata profile: {arg} needs a file name")
            output = args[i + 1]
            i += 2
            continue
        if arg.startswith("--output="):
            output = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return output, rest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m nbdata")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("demo", help="run a small fused pipeline and print its plan and speed")
    run.add_argument("--rows", type=int, default=500_000)
    look = sub.add_parser("inspect", help="count the records of a TFRecord or text file and "
                                          "show the first Examples' features")
    look.add_argument("file")
    look.add_argument("--compression", choices=["", "GZIP", "ZLIB"], default=None,
                      help="default: GZIP or ZLIB when the file's first bytes inflate as such")
    look.add_argument("--format", choices=["tfrecord", "text"], default=None,
                      help="default: tfrecord when the first record's length checksum holds, "
                           "text when the first bytes are text, else an error")
    look.add_argument("--records", type=int, default=3, help="how many records to show")
    prof = sub.add_parser("profile", help="run a Python script and write a trace of what its "
                                         "pipelines did (Chrome trace-event JSON for "
                                         "Perfetto / chrome://tracing)",
                          usage="python -m nbdata profile [-o TRACE] script.py [-o TRACE] "
                                "[script args] [-- script args]",
                          description="Runs script.py with its arguments while a trace "
                                      "records. -o/--output names the trace file, before or "
                                      "after the script's name; the script gets every other "
                                      "argument, and everything after '--' (its own -o "
                                      "goes there).")
    prof.add_argument("-o", "--output", default=None,
                      help="the trace file (default: the script's name with .trace.json)")
    prof.add_argument("script")
    prof.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    fz = sub.add_parser("fuzz", help="mutation-fuzz the readers and decoders")
    fz.add_argument("--cases", type=int, default=100_000)
    fz.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "profile":
        output, script_args = script_options(args.args, args.output)
        raise SystemExit(profile_script(args.script, script_args, output))
    if args.command == "fuzz":
        from nbdata.io.fuzz import fuzz
        raise SystemExit(1 if fuzz(args.cases, args.seed) else 0)
    if args.command == "demo":
        demo(args.rows)
    elif args.command == "inspect":
        # Any error: one line on stderr naming the file (and the offset), exit status 1.
        from nbdata.errors import OpError
        from nbdata.io.inspect import error_line, inspect_file
        try:
            inspect_file(args.file, args.compression, args.format, args.records)
        except (OpError, OSError) as e:
            sys.stdout.flush()
            print(error_line(args.file, e), file=sys.stderr)
            raise SystemExit(1) from None


if __name__ == "__main__":
    main()
