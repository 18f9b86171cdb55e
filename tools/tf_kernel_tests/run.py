"""Run TF tf.data kernel-test files against nbdata through the shim, one subprocess
per file, one at a time; print a per-file table, the pass rate over applicable tests
and the most common failure causes.

Usage: python tools/tf_kernel_tests/run.py DIR_WITH_TF_TEST_FILES [--files a,b,...]
       [--json OUT.json] [--per-test-timeout S] [--per-file-timeout S]
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FILES = ("range from_tensor_slices from_tensors map filter batch padded_batch unbatch "
                 "shuffle repeat take skip zip concatenate flat_map interleave window enumerate "
                 "shard cache reduce text_line_dataset tf_record_dataset "
                 "fixed_length_record_dataset").split()


def cause_key(msg):
    """Group failure messages: drop numbers, quoted values and array dumps."""
    m = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", msg)
    m = re.sub(r"\[[^\]]*\]|\([^)]*\)", "(…)", m)
    m = re.sub(r"\d+", "N", m)
    return m[:140]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--files", default=",".join(DEFAULT_FILES))
    ap.add_argument("--json", default=None)
    ap.add_argument("--per-test-timeout", type=int, default=60)
    ap.add_argument("--per-file-timeout", type=int, default=900)
    ap.add_argument("--causes", type=int, default=25)
    a = ap.parse_args()
    results = []
    for f in a.files.split(","):
        path = os.path.join(a.dir, f + "_test.py")
        try:
            p = subprocess.run([sys.executable, os.path.join(HERE, "child.py"), path,
                                "--per-test-timeout", str(a.per_test_timeout)],
                               capture_output=True, text=True, timeout=a.per_file_timeout)
            last = [l for l in p.stdout.splitlines() if l.startswith("{")]
            d = json.loads(last[-1]) if last else {"file": f, "import_error":
                                                   "child crashed: " + p.stderr[-300:], "rows": []}
        except subprocess.TimeoutExpired:
            d = {"file": f, "import_error": "file timed out", "rows": []}
        d["file"] = f
        results.append(d)
        c = collections.Counter(r[1] for r in d["rows"])
        print("%-30s pass %4d  fail %4d  n/a %4d  tf-skip %3d %s" % (
              f, c["pass"], c["fail"], c["na"], c["skip"],
              ("IMPORT ERROR " + d["import_error"]) if d.get("import_error") else ""),
              flush=True)
    tot = collections.Counter()
    causes = collections.defaultdict(list)
    na_causes = collections.Counter()
    print("\n| file | passed | failed | n/a | skipped by TF | pass rate |\n"
          "|---|---:|---:|---:|---:|---:|")
    for d in results:
        c = collections.Counter(r[1] for r in d["rows"])
        tot.update(c)
        app = c["pass"] + c["fail"]
        print("| %s | %d | %d | %d | %d | %s |" % (d["file"], c["pass"], c["fail"], c["na"],
              c["skip"],
              "%.0f%%" % (100.0 * c["pass"] / app) if app else "-"))
        for r in d["rows"]:
            if r[1] == "fail":
                causes[cause_key(r[2])].append((d["file"], r[0], r[2], r[3]))
            elif r[1] in ("na", "skip"):
                na_causes[re.sub(r"\d+", "N", r[2])[:100]] += 1
    app = tot["pass"] + tot["fail"]
    print("| **total** | %d | %d | %d | %d | **%.1f%%** |" % (
          tot["pass"], tot["fail"], tot["na"], tot["skip"],
          100.0 * tot["pass"] / app if app else 0))
    print("\nTop failure causes:")
    for k, v in sorted(causes.items(), key=lambda kv: -len(kv[1]))[:a.causes]:
        files = collections.Counter(x[0] for x in v)
        print("%4d  %s\n      files: %s\n      e.g. %s (%s)" % (
            len(v), k, dict(files), v[0][1].split(".", 1)[1], v[0][3]))
    print("\nNot-applicable reasons:")
    for k, n in na_causes.most_common(20):
        print("%4d  %s" % (n, k))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
