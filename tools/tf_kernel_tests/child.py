"""Run one TF kernel-test file under the shim; print a JSON summary on the last line.

Usage: python child.py PATH/TO/xxx_test.py [--per-test-timeout S] [-k SUBSTRING]
"""
import argparse
import importlib.util
import json
import os
import re
import signal
import sys
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tfshim  # noqa: E402

tfshim.install()


class _Timeout(Exception):
    pass


def _first_line(err):
    etype, value, tb = err
    msg = "%s: %s" % (etype.__name__, str(value).strip().splitlines()[0][:300] if str(value).strip() else "")
    # where in the test file / shim it happened (last frame outside unittest)
    frames = [f for f in traceback.extract_tb(tb) if "unittest" not in f.filename]
    where = ""
    if frames:
        f = frames[-1]
        where = "%s:%d" % (os.path.basename(f.filename), f.lineno)
    return msg, where


def _na_in_chain(exc):
    """The N/A reason when a shim NotApplicable caused this error, even when nbdata
    wrapped it (an error raised inside a map function comes back as an nbdata error
    that names it); None otherwise."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, unittest.SkipTest):
            return str(exc)
        m = re.search(r"raised NotApplicable: (N/A: [^'\"]*)", str(exc))
        if m:
            return m.group(1)
        m = re.search(r"<N/A ([^>]*)>", str(exc))   # a stand-in reached nbdata as a value
        if m:
            return "N/A: " + m.group(1)
        exc = exc.__cause__ or exc.__context__
    return None


class Result(unittest.TestResult):
    def __init__(self, per_test_timeout):
        super().__init__()
        self.rows = []
        self.t = per_test_timeout

    def startTest(self, test):
        super().startTest(test)
        signal.alarm(self.t)

    def stopTest(self, test):
        signal.alarm(0)
        super().stopTest(test)

    def addSuccess(self, test):
        self.rows.append((test.id(), "pass", "", ""))

    def addFailure(self, test, err):
        na = _na_in_chain(err[1])
        if na is not None:
            return self.addSkip(test, na)
        self.rows.append((test.id(), "fail", *_first_line(err)))

    def addError(self, test, err):
        na = _na_in_chain(err[1])
        if na is not None:
            return self.addSkip(test, na)
        self.rows.append((test.id(), "fail", *_first_line(err)))

    def addSkip(self, test, reason):
        # "N/A: ..." comes from the shim's rule; any other skip is TF's own skipTest()
        self.rows.append((test.id(), "na" if reason.startswith("N/A") else "skip", reason, ""))

    def addSubTest(self, test, subtest, err):
        if err is not None:
            na = _na_in_chain(err[1])
            if na is not None:
                self.rows.append((subtest.id(), "na", na, ""))
            else:
                self.rows.append((subtest.id(), "fail", *_first_line(err)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--per-test-timeout", type=int, default=60)
    ap.add_argument("-k", default=None)
    a = ap.parse_args()

    def on_alarm(*_):
        raise _Timeout("test exceeded %ss" % a.per_test_timeout)

    signal.signal(signal.SIGALRM, on_alarm)
    name = os.path.splitext(os.path.basename(a.path))[0]
    try:
        spec = importlib.util.spec_from_file_location("tfk_" + name, a.path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    except BaseException as e:  # noqa: BLE001
        msg, where = _first_line(sys.exc_info())
        print(json.dumps({"file": name, "import_error": msg, "where": where, "rows": []}))
        return
    suite = unittest.defaultTestLoader.loadTestsFromModule(mod)
    if a.k:
        def filt(s):
            out = unittest.TestSuite()
            for t in s:
                if isinstance(t, unittest.TestSuite):
                    out.addTest(filt(t))
                elif a.k in t.id():
                    out.addTest(t)
            return out
        suite = filt(suite)
    res = Result(a.per_test_timeout)
    suite.run(res)
    print(json.dumps({"file": name, "rows": res.rows}))


if __name__ == "__main__":
    main()
