"""A fake ``tensorflow`` package over nbdata, for running TensorFlow's own tf.data
kernel tests (tensorflow/python/data/kernel_tests/*_test.py) against nbdata.

Nothing here is TensorFlow code: every adapter below is written over nbdata, numpy and
absl.  ``install()`` puts a meta-path finder first on ``sys.meta_path`` so that every
``tensorflow`` / ``tensorflow.*`` import is answered from here, never from a real
TensorFlow that may be installed.

Modules fall into three groups (see README.md for the "not applicable" rule):

* ADAPTED: the module is built by a ``_mod_<name>`` function below.  An attribute the
  adapter lacks raises AttributeError: the test fails and counts as a *shim gap*.
* NOT_APPLICABLE: TF internals with no nbdata counterpart by design (graph mode,
  sessions, tf.function tracing, variables, TF checkpoint files, protos, sanitizers,
  ...).  Any use of them raises ``NotApplicable`` (a ``unittest.SkipTest``), so the
  test is reported as "not applicable".
* anything else under ``tensorflow``: treated as NOT_APPLICABLE too, and listed by
  name in the skip reason so the rule can be audited.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import importlib
import importlib.abc
import importlib.machinery
import itertools
import os
import re
import sys
import tempfile
import types
import unittest

import numpy as np

import nbdata as nd
import nbdata.compat.v1 as v1
from nbdata import spec as _spec


class NotApplicable(unittest.SkipTest):
    """Raised when a test reaches a TF-internal API (counted as not applicable)."""


def _na(what):
    raise NotApplicable("N/A: " + what)


class _NAObject:
    """Stands in for a TF-internal symbol; any real use marks the test N/A."""

    def __init__(self, name):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _NAObject(self._name + "." + attr)

    def __call__(self, *a, **k):
        _na(self._name)

    def __iter__(self):
        _na(self._name)

    def __bool__(self):
        _na(self._name)

    def __enter__(self):
        _na(self._name)

    def __exit__(self, *a):
        return False

    def __mro_entries__(self, bases):
        _na(self._name)

    def __repr__(self):
        return "<N/A %s>" % self._name


def _na_decorator(name):
    """A decorator whose decorated test is N/A (e.g. test_util.run_v1_only)."""

    def deco(*args, **kwargs):
        def wrap(fn):
            if isinstance(fn, type):
                return fn

            @functools.wraps(fn)
            def inner(*a, **k):
                _na(name)

            return inner

        if len(args) == 1 and callable(args[0]) and not kwargs:
            return wrap(args[0])
        return wrap

    return deco


# ----------------------------------------------------------------------- helpers
def _np_dtype(dtype):
    if dtype is None:
        return None
    if dtype is v1.string or dtype == v1.string:
        return object
    if isinstance(dtype, type):
        return np.dtype(dtype)
    return np.dtype(getattr(dtype, "dtype", dtype))


def _to_bytes_array(value):
    def enc(x):
        return x.encode() if isinstance(x, str) else x

    arr = np.asarray(value, dtype=object)
    if arr.shape == ():
        return np.array(enc(arr.item()), dtype=object)
    flat = [enc(x) for x in arr.ravel()]
    return np.array(flat, dtype=object).reshape(arr.shape)


def _is_stringish(value):
    if isinstance(value, (str, bytes)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "SUO"
    if isinstance(value, (list, tuple)) and value:
        return _is_stringish(value[0])
    return False


def constant(value, dtype=None, shape=None, name=None):
    if dtype is not None and (dtype is v1.string or dtype == v1.string) or (
            dtype is None and _is_stringish(value)):
        out = _to_bytes_array(value)
    elif isinstance(value, (nd.SparseTensor,)):
        return value
    else:
        out = np.asarray(value, dtype=_np_dtype(dtype))
        if dtype is None and out.dtype == np.float64 and not isinstance(value, np.ndarray):
            out = out.astype(np.float32)
        if dtype is None and out.dtype == np.int64 and not isinstance(value, (np.ndarray, np.generic)):
            out = out.astype(np.int32)
    if shape is not None:
        out = np.broadcast_to(out, tuple(shape)).copy() if out.size == 1 else out.reshape(shape)
    return out


def _module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    return m


# ------------------------------------------------------------------ combinations
class NamedObject:
    def __init__(self, name, obj):
        self._name, self._obj = name, obj

    def __getattr__(self, name):
        return getattr(self._obj, name)

    def __call__(self, *args, **kwargs):
        return self._obj(*args, **kwargs)

    def __iter__(self):
        return self._obj.__iter__()

    def __repr__(self):
        return self._name


def combine(**kwargs):
    if not kwargs:
        return [collections.OrderedDict()]
    keys = sorted(kwargs)
    values = [v if isinstance(v, list) else [v] for v in (kwargs[k] for k in keys)]
    return [collections.OrderedDict(zip(keys, c)) for c in itertools.product(*values)]


def times(*combined):
    out = combined[0]
    for other in combined[1:]:
        new = []
        for a in out:
            for b in other:
                if set(a) & set(b):
                    raise ValueError("keys overlap in times(): %s" % (set(a) & set(b)))
                d = collections.OrderedDict(a)
                d.update(b)
                new.append(collections.OrderedDict(sorted(d.items())))
        out = new
    return out


def _combo_name(combo):
    parts = []
    for k, v in combo.items():
        parts.append("%s_%s" % (re.sub(r"\W", "", k), re.sub(r"\W", "", str(v))[:40]))
    return "_test_" + "_".join(parts)


def generate(combos, test_combinations=None):
    """Eager, tf_api_version=2 combinations only; the rest are dropped."""

    def decorator(fn):
        kept = []
        for c in combos:
            if c.get("mode", "eager") != "eager" or c.get("tf_api_version", 2) != 2:
                continue
            kept.append(c)
        if not kept:
            @functools.wraps(fn)
            def graph_only(self, *a, **k):
                _na("no eager/TF2 combination (graph-mode or v1-only test)")

            return graph_only
        from absl.testing import parameterized
        params, seen = [], collections.Counter()
        for c in kept:
            kwargs = {k: v for k, v in c.items() if k not in ("mode", "tf_api_version")}
            name = _combo_name(c)
            seen[name] += 1
            if seen[name] > 1:
                name += "_%d" % seen[name]
            params.append(dict(testcase_name=name, **kwargs))
        return parameterized.named_parameters(*params)(fn)

    return decorator


def _mod_combinations(name):
    return _module(name, combine=combine, times=times, generate=generate,
                   NamedObject=NamedObject, EagerGraphCombination=object,
                   TFVersionCombination=object)


# -------------------------------------------------------------------- test base
def _evaluate(x):
    if isinstance(x, dict):
        return type(x)((k, _evaluate(v)) for k, v in x.items())
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*[_evaluate(v) for v in x])
    if isinstance(x, (tuple, list)):
        return type(x)(_evaluate(v) for v in x)
    if isinstance(x, nd.SparseTensor):
        return v1.SparseTensorValue(np.asarray(x.indices), np.asarray(x.values),
                                    np.asarray(x.dense_shape))
    if isinstance(x, (np.ndarray, np.generic, bytes, str, int, float, bool)) or x is None:
        return x
    if hasattr(x, "numpy"):
        try:
            return x.numpy()
        except Exception:
            return x
    return x


def _norm_for_compare(a):
    a = np.asarray(a)
    if a.dtype.kind in "US":
        return _to_bytes_array(a)
    if a.dtype.kind == "O":
        return _to_bytes_array(a)
    return a


class TestCase(unittest.TestCase):
    """The few tf.test.TestCase assertions the kernel tests use, over numpy."""

    def get_temp_dir(self):
        if not hasattr(self, "_tmpdir"):
            self._tmpdir = tempfile.mkdtemp(prefix="tfk_")
        return self._tmpdir

    def evaluate(self, x):
        return _evaluate(x)

    @contextlib.contextmanager
    def cached_session(self, *a, **k):
        yield types.SimpleNamespace(run=lambda x, **kw: _evaluate(x() if callable(x) else x))

    session = cached_session
    test_session = cached_session

    def assertAllEqual(self, a, b, msg=None):
        a, b = _evaluate(a), _evaluate(b)
        if isinstance(a, v1.SparseTensorValue) or isinstance(b, v1.SparseTensorValue):
            return self.assertSparseValuesEqual(a, b)
        if _is_ragged(a) or _is_ragged(b):
            def as_list(x):
                if _is_ragged(x):
                    return x.to_list()
                if isinstance(x, (list, tuple)):
                    return [as_list(v) for v in x]
                return _norm_for_compare(x).tolist()
            return self.assertEqual(as_list(a), as_list(b), msg)
        a, b = _norm_for_compare(a), _norm_for_compare(b)
        self.assertEqual(a.shape, b.shape, msg or "shape mismatch: %s vs %s" % (a, b))
        np.testing.assert_array_equal(a, b, err_msg=msg or "")

    def assertAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):
        a, b = _evaluate(a), _evaluate(b)
        if isinstance(a, dict):
            self.assertEqual(sorted(a), sorted(b))
            for k in a:
                self.assertAllClose(a[k], b[k], rtol, atol, msg)
            return
        if isinstance(a, (list, tuple)) and not _is_stringish(a) and any(
                isinstance(x, (list, tuple, dict, np.ndarray)) for x in a):
            self.assertEqual(len(a), len(b))
            for x, y in zip(a, b):
                self.assertAllClose(x, y, rtol, atol, msg)
            return
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind in "USO" or b.dtype.kind in "USO":
            return self.assertAllEqual(a, b, msg)
        self.assertEqual(a.shape, b.shape, msg)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=msg or "")

    def assertNotAllEqual(self, a, b, msg=None):
        try:
            self.assertAllEqual(a, b)
        except AssertionError:
            return
        self.fail(msg or "Expected unequal values: %s" % (a,))

    def assertSparseValuesEqual(self, a, b):
        a, b = _evaluate(a), _evaluate(b)
        self.assertAllEqual(a.indices, b.indices)
        self.assertAllEqual(a.values, b.values)
        self.assertAllEqual(a.dense_shape, b.dense_shape)

    def assertItemsEqual(self, a, b, msg=None):
        def key(x):
            x = _evaluate(x)
            if isinstance(x, np.ndarray):
                return repr(x.tolist())
            if isinstance(x, np.generic):
                return repr(x.item())
            return repr(x)

        self.assertCountEqual([key(x) for x in a], [key(x) for x in b], msg)

    def assertRaisesWithPredicateMatch(self, exception_type, predicate):
        if isinstance(predicate, str):
            pattern = predicate
            predicate = lambda e: re.search(pattern, str(e)) is not None
        test = self

        class _Ctx:
            def __enter__(self):
                return self

            def __exit__(self, etype, value, tb):
                if etype is None:
                    test.fail("%s not raised" % getattr(exception_type, "__name__", exception_type))
                if not issubclass(etype, exception_type):
                    return False
                if not predicate(value):
                    test.fail("exception %r did not match predicate" % (value,))
                return True

        return _Ctx()

    def assertRaisesOpError(self, expected_err_re_or_predicate):
        return self.assertRaisesWithPredicateMatch(nd.errors.OpError,
                                                   expected_err_re_or_predicate)

    def assertShapeEqual(self, np_array, tensor, msg=None):
        self.assertEqual(np.asarray(np_array).shape, tuple(np.asarray(_evaluate(tensor)).shape), msg)

    def assertNotEmpty(self, x):
        self.assertTrue(len(x) > 0)

    def assertEmpty(self, x):
        self.assertEqual(len(x), 0)

    def assertLen(self, x, n):
        self.assertEqual(len(x), n)

    def assertStartsWith(self, s, prefix):
        self.assertTrue(str(s).startswith(prefix), "%r does not start with %r" % (s, prefix))

    def assertDTypeEqual(self, target, expected_dtype):
        self.assertEqual(np.asarray(target).dtype, np.dtype(expected_dtype))


def _test_main(*a, **k):
    from absl.testing import absltest
    absltest.main()


def _mod_test(name):
    return _module(name, TestCase=TestCase, main=_test_main,
                   is_gpu_available=lambda *a, **k: False,
                   is_built_with_cuda=lambda: False,
                   get_temp_dir=lambda: tempfile.mkdtemp(prefix="tfk_"),
                   mock=unittest.mock if hasattr(unittest, "mock") else None)


def _get_next_fn(iterator):
    def get_next():
        try:
            return next(iterator)
        except StopIteration:
            raise nd.errors.OutOfRangeError("End of sequence") from None

    return get_next


def _is_sparse(x):
    return isinstance(x, (nd.SparseTensor, v1.SparseTensorValue))


def _is_ragged(x):
    return isinstance(x, nd.RaggedTensor)


class DatasetTestBase(TestCase):

    def assert_op_cancelled(self, op):
        with self.assertRaises(nd.errors.CancelledError):
            self.evaluate(op)

    def assertValuesEqual(self, expected, actual):
        if _is_sparse(expected):
            self.assertSparseValuesEqual(expected, actual)
        elif _is_ragged(expected) or _is_ragged(actual):
            e = expected.to_list() if _is_ragged(expected) else np.asarray(expected).tolist()
            a = actual.to_list() if _is_ragged(actual) else np.asarray(actual).tolist()
            self.assertEqual(e, a)
        else:
            self.assertAllEqual(expected, actual)

    def getNext(self, dataset, requires_initialization=False, shared_name=None):
        return _get_next_fn(iter(dataset))

    def _compareOutputToExpected(self, result_values, expected_values, assert_items_equal):
        if assert_items_equal:
            self.assertItemsEqual(result_values, expected_values)
            return
        for i in range(len(result_values)):
            _spec.assert_same_structure(result_values[i], expected_values[i])
            for r, e in zip(_spec.flatten(result_values[i]), _spec.flatten(expected_values[i])):
                self.assertValuesEqual(e, r)

    def getDatasetOutput(self, dataset, requires_initialization=False):
        return self.getIteratorOutput(self.getNext(dataset))

    def getIteratorOutput(self, get_next):
        out = []
        while True:
            try:
                out.append(self.evaluate(get_next()))
            except nd.errors.OutOfRangeError:
                return out

    def assertDatasetProduces(self, dataset, expected_output=None, expected_shapes=None,
                              expected_error=None, requires_initialization=False,
                              num_test_iterations=1, assert_items_equal=False,
                              expected_error_iter=1):
        self.assertTrue(expected_error is not None or expected_output is not None)
        if expected_error:
            with self.assertRaisesWithPredicateMatch(expected_error[0], expected_error[1]):
                get_next = self.getNext(dataset)
                for _ in range(expected_error_iter):
                    self.evaluate(get_next())
            return
        if expected_shapes:
            self.assertEqual(expected_shapes, get_legacy_output_shapes(dataset))
        for _ in range(num_test_iterations):
            get_next = self.getNext(dataset)
            result = []
            for _ in range(len(expected_output)):
                try:
                    result.append(self.evaluate(get_next()))
                except nd.errors.OutOfRangeError:
                    raise AssertionError("Dataset ended early, producing %d elements out of %d"
                                         % (len(result), len(expected_output)))
            self._compareOutputToExpected(result, expected_output, assert_items_equal)
            with self.assertRaises(nd.errors.OutOfRangeError):
                self.evaluate(get_next())
            with self.assertRaises(nd.errors.OutOfRangeError):
                self.evaluate(get_next())

    def assertDatasetsEqual(self, dataset1, dataset2):
        next1, next2 = self.getNext(dataset1), self.getNext(dataset2)
        while True:
            try:
                op1 = self.evaluate(next1())
            except nd.errors.OutOfRangeError:
                with self.assertRaises(nd.errors.OutOfRangeError):
                    self.evaluate(next2())
                break
            op2 = self.evaluate(next2())
            op1, op2 = _spec.flatten(op1), _spec.flatten(op2)
            self.assertEqual(len(op1), len(op2))
            for a, b in zip(op1, op2):
                if _is_sparse(a) or _is_ragged(a):
                    self.assertValuesEqual(a, b)
                else:
                    self.assertAllClose(a, b)

    def assertDatasetsRaiseSameError(self, dataset1, dataset2, exception_class,
                                     replacements=None):
        next1, next2 = self.getNext(dataset1), self.getNext(dataset2)
        try:
            self.evaluate(next1())
            raise ValueError("Expected dataset to raise %r" % exception_class)
        except exception_class as e:
            msg = getattr(e, "message", str(e))
            for old, new, count in replacements or []:
                msg = msg.replace(old, new, count)
            with self.assertRaisesRegex(exception_class, re.escape(msg)):
                self.evaluate(next2())

    def structuredDataset(self, dataset_structure, shape=None, dtype=np.int64):
        if shape is None:
            shape = []
        if dataset_structure is None:
            return nd.Dataset.from_tensors(np.zeros(shape, dtype=_np_dtype(dtype)))
        return nd.Dataset.zip(tuple(self.structuredDataset(s, shape, dtype)
                                    for s in dataset_structure))

    def structuredElement(self, element_structure, shape=None, dtype=np.int64):
        if shape is None:
            shape = []
        if element_structure is None:
            return np.zeros(shape, dtype=_np_dtype(dtype))
        return tuple(self.structuredElement(s, shape, dtype) for s in element_structure)

    def verifyRandomAccess(self, dataset, expected):
        for i in range(len(expected)):
            self.assertAllEqual(expected[i], self.evaluate(nd.experimental.at(dataset, i)))
        with self.assertRaises(nd.errors.OutOfRangeError):
            self.evaluate(nd.experimental.at(dataset, len(expected)))

    def verifyRandomAccessInfiniteCardinality(self, dataset, expected):
        for i in range(len(expected)):
            self.assertAllEqual(expected[i], self.evaluate(nd.experimental.at(dataset, i)))

    def checkDeterminism(self, dataset_fn, expect_determinism, expected_elements):
        if expect_determinism:
            for _ in range(2):
                self.assertDatasetProduces(dataset_fn(1), expected_elements)
        else:
            _na("checkDeterminism(nondeterministic): relies on TF thread scheduling")

    def graphRoundTrip(self, dataset, allow_stateful=False):
        _na("graphRoundTrip (GraphDef serialization)")

    def textFileInitializer(self, vals):
        _na("lookup tables")

    keyValueTensorInitializer = datasetInitializer = lookupTableInitializer = textFileInitializer

    def configureDevicesForMultiDeviceTest(self, num_devices):
        _na("multi-device placement")


def _default():
    return combine(tf_api_version=[1, 2], mode=["eager", "graph"])


def _mod_test_base(name):
    return _module(
        name, DatasetTestBase=DatasetTestBase,
        default_test_combinations=_default,
        eager_only_combinations=lambda: combine(tf_api_version=[1, 2], mode="eager"),
        graph_only_combinations=lambda: combine(tf_api_version=[1, 2], mode="graph"),
        v1_only_combinations=lambda: combine(tf_api_version=1, mode=["eager", "graph"]),
        v2_only_combinations=lambda: combine(tf_api_version=2, mode=["eager", "graph"]),
        v2_eager_only_combinations=lambda: combine(tf_api_version=2, mode="eager"))


# ------------------------------------------------------------ checkpoint tests
class CheckpointTestBase(TestCase):
    """verify_* over nbdata's Iterator.save() / restore(): a break point saves the
    iterator's state, builds a fresh dataset with ds_fn and a fresh iterator,
    restores the state into it and goes on."""

    def _get(self, it):
        try:
            return self.evaluate(next(it))
        except StopIteration:
            raise nd.errors.OutOfRangeError("End of sequence") from None

    def gen_outputs(self, ds_fn, break_points, num_outputs, ckpt_saved=False,
                    sparse_tensors=False, verify_exhausted=True, save_checkpoint_at_end=True):
        """Eager semantics: each segment builds a fresh dataset and iterator, restores
        the last saved state (if any), produces its outputs and saves the state."""
        outputs = []
        for i in range(len(break_points) + 1):
            it = iter(ds_fn())
            if ckpt_saved:
                it.restore(self._ckpt)
            start = break_points[i - 1] if i > 0 else 0
            end = break_points[i] if i < len(break_points) else num_outputs
            for _ in range(end - start):
                outputs.append(self._get(it))
            if verify_exhausted and (i == len(break_points) or end == num_outputs):
                with self.assertRaises(nd.errors.OutOfRangeError):
                    self._get(it)
            if save_checkpoint_at_end or i < len(break_points):
                self._ckpt = it.save()
                ckpt_saved = True
            # TF drops its reference to the segment's iterator here (the next
            # `iterator = iter(ds_fn())` replaces it): close ours the same way, so a
            # file cache's writer does not outlive it.
            close = getattr(it, "close", None)
            if close is not None:
                close()
            del it
        return outputs

    def match(self, expected, actual, assert_items_equal=False):
        self.assertEqual(len(expected), len(actual))
        if assert_items_equal:
            return DatasetTestBase.assertItemsEqual(self, expected, actual)
        for e, a in zip(expected, actual):
            _spec.assert_same_structure(e, a)
            for x, y in zip(_spec.flatten(e), _spec.flatten(a)):
                DatasetTestBase.assertValuesEqual(self, x, y)

    def does_not_match(self, expected, actual):
        with self.assertRaises(AssertionError):
            self.match(expected, actual)

    def gen_break_points(self, num_outputs, num_samples=10):
        return np.linspace(0, num_outputs, num_samples, dtype=int)

    def verify_run_with_breaks(self, ds_fn, break_points, num_outputs, sparse_tensors=False,
                               verify_exhausted=True, assert_items_equal=False):
        expected = self.gen_outputs(ds_fn, [], num_outputs, verify_exhausted=verify_exhausted)
        actual = self.gen_outputs(ds_fn, break_points, num_outputs,
                                  verify_exhausted=verify_exhausted)
        self.match(expected, actual, assert_items_equal)

    def verify_unused_iterator(self, ds_fn, num_outputs, sparse_tensors=False,
                               verify_exhausted=True, assert_items_equal=False):
        self.verify_run_with_breaks(ds_fn, [0], num_outputs, verify_exhausted=verify_exhausted,
                                    assert_items_equal=assert_items_equal)

    def verify_fully_used_iterator(self, ds_fn, num_outputs, sparse_tensors=False,
                                   assert_items_equal=False):
        self.verify_run_with_breaks(ds_fn, [num_outputs], num_outputs,
                                    assert_items_equal=assert_items_equal)

    def verify_exhausted_iterator(self, ds_fn, num_outputs, sparse_tensors=False,
                                  assert_items_equal=False):
        self.gen_outputs(ds_fn, [], num_outputs, verify_exhausted=True)
        actual = self.gen_outputs(ds_fn, [], 0, ckpt_saved=True, verify_exhausted=True)
        self.assertLen(actual, 0)

    def verify_multiple_breaks(self, ds_fn, num_outputs, num_breaks=10, sparse_tensors=False,
                               verify_exhausted=True, assert_items_equal=False):
        self.verify_run_with_breaks(ds_fn, self.gen_break_points(num_outputs, num_breaks),
                                    num_outputs, verify_exhausted=verify_exhausted,
                                    assert_items_equal=assert_items_equal)

    def verify_reset_restored_iterator(self, ds_fn, num_outputs, break_point=None,
                                       sparse_tensors=False, verify_exhausted=True,
                                       assert_items_equal=False):
        # TF skips this check in eager mode (eager iterators are not re-initialized).
        self.skipTest("Eager mode iteration do not support re-initialization.")

    def verify_error_on_save(self, ds_fn, num_outputs, error, break_point=None,
                             sparse_tensors=False):
        if break_point is None:
            break_point = num_outputs // 2
        it = iter(ds_fn())
        for _ in range(break_point):
            self._get(it)
        with self.assertRaises(error):
            it.save()


def _ckpt_default():
    def make(name):
        def fn(obj, ds_fn, num_outputs, sparse_tensors=False, assert_items_equal=False):
            getattr(obj, name)(ds_fn=ds_fn, num_outputs=num_outputs,
                               sparse_tensors=sparse_tensors,
                               assert_items_equal=assert_items_equal)

        return combine(verify_fn=NamedObject(name, fn))

    return (make("verify_unused_iterator") + make("verify_fully_used_iterator")
            + make("verify_exhausted_iterator") + make("verify_multiple_breaks")
            + make("verify_reset_restored_iterator"))


def _mod_checkpoint_test_base(name):
    return _module(name, CheckpointTestBase=CheckpointTestBase,
                   default_test_combinations=_ckpt_default)


def _mod_tf_record_test_base(name):
    from tf_record_base import FeaturesTestBase, TFRecordTestBase
    return _module(name, FeaturesTestBase=FeaturesTestBase, TFRecordTestBase=TFRecordTestBase)


# ------------------------------------------------------------------ data ops
def get_legacy_output_shapes(ds):
    return ds.output_shapes


def get_legacy_output_types(ds):
    return ds.output_types


def get_legacy_output_classes(ds):
    return ds.output_classes


def _mod_dataset_ops(name):
    m = _module(name, Dataset=nd.Dataset, DatasetV2=nd.Dataset, DatasetV1=nd.Dataset,
                DatasetSpec=nd.DatasetSpec, AUTOTUNE=nd.AUTOTUNE,
                INFINITE=nd.INFINITE, UNKNOWN=nd.UNKNOWN,
                get_legacy_output_shapes=get_legacy_output_shapes,
                get_legacy_output_types=get_legacy_output_types,
                get_legacy_output_classes=get_legacy_output_classes,
                get_structure=lambda ds: ds.element_spec,
                make_one_shot_iterator=lambda ds: ds.make_one_shot_iterator(),
                make_initializable_iterator=lambda ds, **k: ds.make_initializable_iterator())

    def __getattr__(attr):
        if attr in ("DatasetV1Adapter", "_VariantDataset", "_OptionsDataset",
                    "gen_dataset_ops", "_RestructuredDataset"):
            return _NAObject(name + "." + attr)
        raise AttributeError("shim: %s.%s" % (name, attr))

    m.__getattr__ = __getattr__
    return m


def _fallback(name, *sources, na_default=False):
    """A module whose attributes come from the given objects, in order."""
    m = types.ModuleType(name)

    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        for s in sources:
            if isinstance(s, dict):
                if attr in s:
                    return s[attr]
            elif hasattr(s, attr):
                return getattr(s, attr)
        if na_default and not attr.startswith("__"):
            return _NAObject(name + "." + attr)
        raise AttributeError("shim: %s.%s" % (name, attr))

    m.__getattr__ = __getattr__
    return m


def _mod_options(name):
    return _fallback(name, nd.options, nd, nd.experimental)


def _mod_readers(name):
    return _fallback(name, {"TextLineDatasetV2": nd.TextLineDataset,
                            "TFRecordDatasetV2": nd.TFRecordDataset,
                            "FixedLengthRecordDatasetV2": nd.FixedLengthRecordDataset,
                            # TF's private one-list-of-files reader behind TFRecordDataset
                            "_TFRecordDataset": nd.TFRecordDataset},
                     nd, nd.io if hasattr(nd, "io") else {})


def _mod_errors(name):
    d = {k: getattr(nd.errors, k) for k in dir(nd.errors) if k.endswith("Error")}
    codes = dict(OK=0, CANCELLED=1, UNKNOWN=2, INVALID_ARGUMENT=3, DEADLINE_EXCEEDED=4,
                 NOT_FOUND=5, ALREADY_EXISTS=6, PERMISSION_DENIED=7, RESOURCE_EXHAUSTED=8,
                 FAILED_PRECONDITION=9, ABORTED=10, OUT_OF_RANGE=11, UNIMPLEMENTED=12,
                 INTERNAL=13, UNAVAILABLE=14, DATA_LOSS=15, UNAUTHENTICATED=16)
    return _fallback(name, d, codes)


class DType:
    """tf.DType-like view of a numpy dtype (nbdata takes anything with ``.dtype``)."""

    def __init__(self, d):
        self.dtype = np.dtype(d)
        self.as_numpy_dtype = self.dtype.type
        self.name = self.dtype.name
        self.is_integer = self.dtype.kind in "iu"
        self.is_floating = self.dtype.kind == "f"
        self.is_bool = self.dtype.kind == "b"
        self.is_unsigned = self.dtype.kind == "u"
        self.size = self.dtype.itemsize
        if self.is_integer:
            self.min, self.max = np.iinfo(self.dtype).min, np.iinfo(self.dtype).max
        elif self.is_floating:
            self.min, self.max = np.finfo(self.dtype).min, np.finfo(self.dtype).max

    def __eq__(self, other):
        other = getattr(other, "dtype", other)
        try:
            return self.dtype == other
        except TypeError:
            return False

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self.dtype)

    def __repr__(self):
        return "tf." + self.name

    def __reduce__(self):
        return (DType, (self.dtype,))


def _as_dtype(d):
    if d is v1.string or d == v1.string or d in (str, bytes, object):
        return v1.string
    if isinstance(d, DType):
        return d
    return DType(d)


def _mod_dtypes(name):
    d = {}
    for k in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "bool", "half", "double", "complex64",
              "complex128"):
        d[k] = DType({"half": "float16", "double": "float64"}.get(k, k))
    d["string"] = v1.string
    d["bfloat16"] = _NAObject("dtypes.bfloat16")
    d["variant"] = _NAObject("dtypes.variant")
    d["resource"] = _NAObject("dtypes.resource")
    d["as_dtype"] = _as_dtype
    d["DType"] = DType
    return _fallback(name, d)


def _mod_constant_op(name):
    return _module(name, constant=constant)


def _mod_sparse_tensor(name):
    return _module(name, SparseTensor=nd.SparseTensor, SparseTensorValue=v1.SparseTensorValue,
                   SparseTensorSpec=nd.SparseTensorSpec, is_sparse=_is_sparse)


def _mod_tensor_shape(name):
    return _fallback(name, {"TensorShape": nd.TensorShape,
                            "unknown_shape": lambda rank=None, **k: nd.TensorShape(
                                None if rank is None else [None] * rank),
                            "scalar": lambda: nd.TensorShape([]),
                            "as_shape": nd.TensorShape,
                            "Dimension": lambda v: v})


def _mod_tensor_spec(name):
    return _module(name, TensorSpec=nd.TensorSpec)


def _strip_name(fn):
    @functools.wraps(fn)
    def inner(*a, name=None, **k):
        return fn(*a, **k)

    return inner


def _cast(x, dtype, name=None):
    if dtype == v1.string:
        return _to_bytes_array(x)
    return np.asarray(x).astype(_np_dtype(dtype))


def _range(start, limit=None, delta=1, dtype=None, name=None):
    if limit is None:
        start, limit = 0, start
    out = np.arange(start, limit, delta)
    if dtype is not None:
        out = out.astype(_np_dtype(dtype))
    elif out.dtype == np.int64:
        out = out.astype(np.int32)
    return out


def _fill(dims, value, name=None):
    return np.full(tuple(np.asarray(dims).tolist()), value,
                   dtype=np.asarray(constant(value)).dtype)


def _check_numerics(x, message, name=None):
    x = np.asarray(x)
    if not np.all(np.isfinite(x)):
        raise nd.errors.InvalidArgumentError("%s : Tensor had NaN or Inf values" % message)
    return x


def _reduce(fn):
    def inner(x, axis=None, keepdims=False, name=None, **k):
        return fn(np.asarray(x), axis=axis if axis is None else (tuple(axis) if isinstance(axis, list) else axis),
                  keepdims=keepdims)

    return inner


def _assert_equal(x, y, message=None, summarize=None, name=None, data=None):
    if not np.all(np.equal(np.asarray(x), np.asarray(y))):
        raise nd.errors.InvalidArgumentError("assert_equal failed: %s" % (message or ""))
    return None


_NUMPY_OPS = {
    "equal": _strip_name(lambda a, b: np.equal(_norm_for_compare(a), _norm_for_compare(b))
                         if _is_stringish(a) else np.equal(a, b)),
    "not_equal": _strip_name(lambda a, b: np.not_equal(a, b)),
    "square": _strip_name(np.square), "sqrt": _strip_name(np.sqrt), "abs": _strip_name(np.abs),
    "add": _strip_name(np.add), "subtract": _strip_name(np.subtract),
    "multiply": _strip_name(np.multiply), "mod": _strip_name(np.mod),
    "floormod": _strip_name(np.mod), "floordiv": _strip_name(np.floor_divide),
    "maximum": _strip_name(np.maximum), "minimum": _strip_name(np.minimum),
    "greater": _strip_name(np.greater), "less": _strip_name(np.less),
    "greater_equal": _strip_name(np.greater_equal), "less_equal": _strip_name(np.less_equal),
    "logical_or": _strip_name(np.logical_or), "logical_and": _strip_name(np.logical_and),
    "logical_not": _strip_name(np.logical_not), "exp": _strip_name(np.exp),
    "cast": _cast, "range": _range, "fill": _fill, "check_numerics": _check_numerics,
    "reduce_sum": _reduce(np.sum), "reduce_all": _reduce(np.all), "reduce_any": _reduce(np.any),
    "reduce_max": _reduce(np.max), "reduce_min": _reduce(np.min), "reduce_mean": _reduce(np.mean),
    "ones": lambda shape, dtype=np.float32, name=None: np.ones(shape, _np_dtype(dtype)),
    "zeros": lambda shape, dtype=np.float32, name=None: np.zeros(shape, _np_dtype(dtype)),
    "ones_like": _strip_name(np.ones_like), "zeros_like": _strip_name(np.zeros_like),
    "stack": lambda values, axis=0, name=None: np.stack(values, axis),
    "concat": lambda values, axis, name=None: np.concatenate(values, axis),
    "expand_dims": lambda x, axis, name=None: np.expand_dims(x, axis),
    "squeeze": lambda x, axis=None, name=None: np.squeeze(x, axis),
    "reshape": lambda x, shape, name=None: np.reshape(x, shape),
    "transpose": lambda x, perm=None, name=None: np.transpose(x, perm),
    "tile": lambda x, multiples, name=None: np.tile(x, multiples),
    "shape": lambda x, out_type=np.int32, name=None: np.asarray(np.shape(x), dtype=_np_dtype(out_type)),
    "size": lambda x, name=None: np.int32(np.size(x)),
    "identity": lambda x, name=None: x,
    "gather": lambda params, indices, axis=0, name=None: np.take(params, indices, axis),
    "where": lambda c, x=None, y=None, name=None: np.argwhere(c) if x is None else np.where(c, x, y),
    "constant": constant,
    "placeholder": _NAObject("array_ops.placeholder (graph mode)"),
    "as_string": lambda x, name=None, **k: _to_bytes_array(np.vectorize(str, otypes=[object])(np.asarray(x))) if np.size(x) else _to_bytes_array(np.asarray(x)),
    "assert_equal": _assert_equal,
    "to_int64": lambda x, name=None: np.asarray(x).astype(np.int64),
}


def _has_symbolic(x):
    from nbdata.trace.graph import Symbolic
    if isinstance(x, Symbolic):
        return True
    if isinstance(x, (list, tuple)):
        return any(_has_symbolic(v) for v in x)
    return False


def _symbolic_aware(name, np_fn):
    """The NumPy version of an op, or nbdata's traced op (``v1.<name>``) when an argument
    is a symbolic tensor (a map function traced without a first element)."""
    v1_fn = getattr(v1, name, None)
    if v1_fn is None or not callable(np_fn):
        return np_fn

    @functools.wraps(np_fn)
    def inner(*a, **k):
        if _has_symbolic(a) or _has_symbolic(list(k.values())):
            return v1_fn(*a, **k)
        return np_fn(*a, **k)

    return inner


def _mod_ops_numpy(name):
    return _fallback(name, {k: _symbolic_aware(k, v) for k, v in _NUMPY_OPS.items()})


def _py_func(func=None, inp=None, Tout=None, stateful=True, name=None):
    if inp is None:   # decorator form: @eager_py_func(Tout=...)
        def deco(fn):
            return functools.wraps(fn)(lambda *a: _py_func(fn, list(a), Tout))
        return deco(func) if func is not None else deco
    out = func(*[_evaluate(x) for x in inp])
    if isinstance(Tout, (list, tuple)):
        outs = out if isinstance(out, (list, tuple)) else [out]
        return [_cast(o, t) for o, t in zip(outs, Tout)]
    return _cast(out, Tout)


def _mod_script_ops(name):
    return _module(name, py_func=_py_func, numpy_function=_py_func,
                   eager_py_func=_py_func)


def _mod_random_ops(name):
    rngs = {}

    def _rng(seed):
        # a seeded TF random op is stateful: each call draws the next numbers
        if seed is None:
            return np.random.default_rng()
        return rngs.setdefault(seed, np.random.default_rng(seed))

    def random_uniform(shape, minval=0, maxval=None, dtype=np.float32, seed=None, name=None):
        rng = _rng(seed)
        dt = _np_dtype(dtype)
        if np.issubdtype(dt, np.integer):
            return rng.integers(minval, maxval, size=tuple(shape)).astype(dt)
        return rng.uniform(minval, 1 if maxval is None else maxval, size=tuple(shape)).astype(dt)

    def random_shuffle(value, seed=None, name=None):
        return _rng(seed).permutation(np.asarray(value))

    return _module(name, random_uniform=random_uniform, random_shuffle=random_shuffle)


def _mod_string_ops(name):
    def string_split(source, sep=None, skip_empty=True, delimiter=None, **k):
        return v1.string_split(source, delimiter or sep or " ")

    def string_join(inputs, separator="", name=None):
        parts = [_to_bytes_array(x) for x in inputs]
        sep = separator.encode() if isinstance(separator, str) else separator
        out = np.frompyfunc(lambda *p: sep.join(p), len(parts), 1)(*parts)
        return np.asarray(out, dtype=object)

    return _fallback(name, {"as_string": _NUMPY_OPS["as_string"], "string_join": string_join,
                            "string_split": _NAObject("string_ops.string_split (returns SparseTensor in graph)")},
                     {})


def _mod_compat(name):
    def as_bytes(x, encoding="utf-8"):
        return x if isinstance(x, bytes) else str(x).encode(encoding)

    def as_text(x, encoding="utf-8"):
        return x.decode(encoding) if isinstance(x, bytes) else str(x)

    return _module(name, as_bytes=as_bytes, as_text=as_text, as_str=as_text,
                   as_str_any=lambda x: as_text(x) if isinstance(x, bytes) else str(x),
                   path_to_str=os.fspath, forward_compatible=lambda *a, **k: True)


def _map_structure_up_to(shallow, fn, *structs):
    """nest.map_structure_up_to: fn over the leaves of ``shallow``'s structure."""
    if isinstance(shallow, dict):
        return {k: _map_structure_up_to(shallow[k], fn, *[s[k] for s in structs])
                for k in shallow}
    if isinstance(shallow, (tuple, list)):
        out = [_map_structure_up_to(sh, fn, *[s[i] for s in structs])
               for i, sh in enumerate(shallow)]
        return type(shallow)(*out) if hasattr(shallow, "_fields") else type(shallow)(out)
    return fn(*structs)


def _mod_nest(name):
    return _module(name, flatten=_spec.flatten, map_structure=_spec.map_structure,
                   assert_same_structure=_spec.assert_same_structure,
                   map_structure_up_to=_map_structure_up_to)


def _mod_random_access(name):
    return _module(name, at=nd.experimental.at)


def _mod_global_shuffle_op(name):
    def _global_shuffle(dataset, seed=None, reshuffle_each_iteration=True, name=None):
        return nd.experimental.global_shuffle(dataset, seed=seed,
                                              reshuffle_each_iteration=reshuffle_each_iteration)

    return _module(name, _global_shuffle=_global_shuffle)


def _mod_cardinality(name):
    return _fallback(name, {"INFINITE": nd.experimental.INFINITE_CARDINALITY,
                            "UNKNOWN": nd.experimental.UNKNOWN_CARDINALITY,
                            "cardinality": nd.experimental.cardinality,
                            "assert_cardinality": nd.experimental.assert_cardinality})


def _mod_context(name):
    return _fallback(name, {"executing_eagerly": lambda: True}, na_default=True)


def _mod_tf2(name):
    return _module(name, enabled=lambda: True)


def _mod_test_util(name):
    d = {k: _na_decorator("test_util." + k) for k in (
        "run_v1_only", "run_deprecated_v1", "deprecated_graph_mode_only", "run_v2_only",
        "run_gpu_only", "run_cuda_only", "disable_tfrt", "run_without_tensor_float_32")}
    d["run_v2_only"] = lambda *a, **k: (a[0] if a and callable(a[0]) else (lambda f: f))
    d["run_all_in_graph_and_eager_modes"] = lambda c: c
    d["run_in_graph_and_eager_modes"] = lambda *a, **k: (a[0] if a and callable(a[0]) else (lambda f: f))
    d["is_gpu_available"] = lambda *a, **k: False
    return _fallback(name, d, na_default=True)


def ragged_constant(pylist, dtype=None, ragged_rank=None, inner_shape=None, **kwargs):
    """tf.ragged.constant over nd.RaggedTensor(flat_values, nested_row_splits)."""
    def depth(x):
        if isinstance(x, (list, tuple, np.ndarray)):
            return 1 + max([depth(v) for v in x] or [0])
        return 0

    total = depth(pylist)
    if ragged_rank is None:
        ragged_rank = max(total - 1, 1) if inner_shape is None else total - 1 - len(inner_shape)
    splits, level = [], list(pylist)
    for _ in range(ragged_rank):
        sp, nxt = [0], []
        for row in level:
            row = list(row)
            nxt.extend(row)
            sp.append(sp[-1] + len(row))
        splits.append(np.asarray(sp, dtype=np.int64))
        level = nxt
    flat = constant(level, dtype) if level else np.zeros(
        (0,), _np_dtype(dtype) if dtype is not None else np.float32)
    return nd.RaggedTensor(flat, splits)


def _mod_ragged_factory_ops(name):
    return _module(name, constant=ragged_constant, constant_value=ragged_constant)


def _mod_ragged_tensor(name):
    return _fallback(name, {"RaggedTensor": nd.RaggedTensor,
                            "RaggedTensorSpec": nd.RaggedTensorSpec,
                            "is_ragged": _is_ragged})


def _mod_ops(name):
    return _fallback(name, {"convert_to_tensor": _symbolic_aware(
                                "convert_to_tensor",
                                lambda v, dtype=None, name=None, **k: constant(v, dtype)),
                            "Graph": _NAObject("ops.Graph (graph mode)"),
                            "get_default_graph": _NAObject("ops.get_default_graph (graph mode)"),
                            "device": _NAObject("ops.device (placement)"),
                            "control_dependencies": _NAObject("ops.control_dependencies (graph mode)"),
                            "GraphKeys": _NAObject("ops.GraphKeys (graph mode)"),
                            "add_to_collection": _NAObject("ops.add_to_collection (graph mode)"),
                            "get_collection": _NAObject("ops.get_collection (graph mode)"),
                            "name_scope": _NAObject("ops.name_scope")}, na_default=True)


ADAPTED = {
    "tensorflow.python.framework.combinations": _mod_combinations,
    "tensorflow.python.platform.test": _mod_test,
    "tensorflow.python.platform.googletest": _mod_test,
    "tensorflow.python.data.kernel_tests.test_base": _mod_test_base,
    "tensorflow.python.data.kernel_tests.checkpoint_test_base": _mod_checkpoint_test_base,
    "tensorflow.python.data.kernel_tests.tf_record_test_base": _mod_tf_record_test_base,
    "tensorflow.python.data.ops.dataset_ops": _mod_dataset_ops,
    "tensorflow.python.data.ops.options": _mod_options,
    "tensorflow.python.data.ops.readers": _mod_readers,
    "tensorflow.python.framework.errors": _mod_errors,
    "tensorflow.python.framework.errors_impl": _mod_errors,
    "tensorflow.python.framework.dtypes": _mod_dtypes,
    "tensorflow.python.framework.constant_op": _mod_constant_op,
    "tensorflow.python.framework.sparse_tensor": _mod_sparse_tensor,
    "tensorflow.python.framework.tensor_shape": _mod_tensor_shape,
    "tensorflow.python.framework.tensor_spec": _mod_tensor_spec,
    "tensorflow.python.framework.ops": _mod_ops,
    "tensorflow.python.framework.test_util": _mod_test_util,
    "tensorflow.python.ops.array_ops": _mod_ops_numpy,
    "tensorflow.python.ops.array_ops_stack": _mod_ops_numpy,
    "tensorflow.python.ops.math_ops": _mod_ops_numpy,
    "tensorflow.python.ops.check_ops": _mod_ops_numpy,
    "tensorflow.python.ops.string_ops": _mod_string_ops,
    "tensorflow.python.ops.script_ops": _mod_script_ops,
    "tensorflow.python.ops.random_ops": _mod_random_ops,
    "tensorflow.python.ops.ragged.ragged_factory_ops": _mod_ragged_factory_ops,
    "tensorflow.python.ops.ragged.ragged_tensor": _mod_ragged_tensor,
    "tensorflow.python.util.compat": _mod_compat,
    "tensorflow.python.data.util.nest": _mod_nest,
    "tensorflow.python.data.experimental.ops.random_access": _mod_random_access,
    "tensorflow.python.data.experimental.ops.global_shuffle_op": _mod_global_shuffle_op,
    "tensorflow.python.data.experimental.ops.cardinality": _mod_cardinality,
    "tensorflow.python.eager.context": _mod_context,
    "tensorflow.python.tf2": _mod_tf2,
}

# Anything else under `tensorflow` (sessions, tf.function, variables, TF checkpoints,
# tensor arrays, lookup tables, protos, sanitizers, servers, ...) is not applicable.


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        name = spec.name
        if name in ADAPTED:
            m = ADAPTED[name](name)
        else:
            m = types.ModuleType(name)

            def __getattr__(attr, _n=name):
                if attr.startswith("__"):
                    raise AttributeError(attr)
                full = _n + "." + attr
                if full in ADAPTED or any(k.startswith(full + ".") for k in ADAPTED):
                    return importlib.import_module(full)
                return _NAObject(full.replace("tensorflow.", "tf.", 1))

            m.__getattr__ = __getattr__
        m.__path__ = []  # every shim module is a package, so submodules resolve here
        m.__spec__ = spec
        m.__loader__ = self
        return m

    def exec_module(self, module):
        parent, _, child = module.__name__.rpartition(".")
        if parent and parent in sys.modules:
            setattr(sys.modules[parent], child, module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "tensorflow" or fullname.startswith("tensorflow."):
            return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)
        return None


def install():
    # the tf.data.experimental modules of the second test set (tfshim_exp.py)
    from tfshim_exp import ADAPTED_EXP
    ADAPTED.update(ADAPTED_EXP)
    for k in [k for k in sys.modules if k == "tensorflow" or k.startswith("tensorflow.")]:
        del sys.modules[k]
    sys.meta_path.insert(0, _Finder())
