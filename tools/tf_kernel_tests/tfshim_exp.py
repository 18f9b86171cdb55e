"""Adapters for the second set of kernel tests (issue 35): the ``tf.data.experimental``
modules and the core modules those tests import (batching, grouping, readers, io,
snapshot, optional_ops, parsing, ...).  Every adapter maps a TF name onto nbdata's;
a TF-internal name nbdata does not mirror by design is N/A (``_NAObject``), a public
name nbdata lacks raises ``AttributeError: shim: ...`` and the test fails.

``tfshim`` merges ``ADAPTED_EXP`` into its ``ADAPTED`` table.
"""
from __future__ import annotations

import numpy as np

import nbdata as nd
import nbdata.compat.v1 as v1

import tfshim as _s

_X = nd.experimental


def _mod_batching(name):
    return _s._fallback(name, _X, {"unbatch": lambda: (lambda ds: ds.unbatch())})


def _mod_grouping(name):
    return _s._fallback(name, _X)


def _mod_exp_readers(name):
    return _s._fallback(name, _csv_names(), nd.io, _X)


def _csv_names():
    from nbdata.io import csv_dataset, example_dataset
    return {"CsvDataset": csv_dataset.CsvDataset,
            "make_csv_dataset": csv_dataset.make_csv_dataset,
            "make_batched_features_dataset": example_dataset.make_batched_features_dataset,
            "TFRecordDataset": nd.TFRecordDataset}


def _mod_interleave_ops(name):
    return _s._fallback(name, _X)


def _mod_shuffle_ops(name):
    # _process_file_infos / _adjust_index are TF internals of index_shuffle
    return _s._fallback(name, _X, {"_process_file_infos": _s._NAObject(
        "shuffle_ops._process_file_infos (TF internal)"),
        "_adjust_index": _s._NAObject("shuffle_ops._adjust_index (TF internal)")})


def _mod_error_ops(name):
    return _s._fallback(name, _X, {"ignore_errors": lambda log_warning=False: (
        lambda ds: ds.ignore_errors(log_warning=log_warning))})


def _mod_from_list(name):
    return _s._module(name, from_list=_X.from_list)


def _mod_exp_io(name):
    return _s._module(name, save=_X.save, load=_X.load)


def _mod_snapshot(name):
    d = {"snapshot": _X.snapshot, "COMPRESSION_NONE": None, "COMPRESSION_GZIP": "GZIP",
         "COMPRESSION_SNAPPY": "SNAPPY", "COMPRESSION_AUTO": "AUTO",
         # the TF 1.x snapshot op with reader/writer thread knobs is not a public
         # tf.data name (tf.data.experimental.snapshot is the new one above)
         "legacy_snapshot": _s._NAObject("snapshot.legacy_snapshot (TF-internal 1.x op)")}
    return _s._module(name, **d)


def _mod_writers(name):
    return _s._module(name, TFRecordWriter=_X.TFRecordWriter)


def _mod_pad_to_cardinality(name):
    return _s._module(name, pad_to_cardinality=_X.pad_to_cardinality)


def _mod_exp_parsing_ops(name):
    from nbdata.io import example_dataset
    return _s._module(name, parse_example_dataset=example_dataset.parse_example_dataset)


def _mod_exp_iterator_ops(name):
    return _s._fallback(name, _X, na_default=True)


def _mod_iterator_ops(name):
    return _s._fallback(name, {"get_next_as_optional": _X.get_next_as_optional},
                        na_default=True)


def _mod_optional_ops(name):
    d = {"Optional": _X.Optional}
    d["OptionalSpec"] = _X.OptionalSpec
    # _OptionalImpl(value, element_spec): TF's private constructor of an Optional
    # holding a value
    d["_OptionalImpl"] = lambda value, element_spec: _X.Optional.from_value(value)
    return _s._fallback(name, d)


def _mod_test_mode(name):
    # TF's switch for its own test-only defaults (warm_start); nbdata has none
    return _s._module(name, toggle_test_mode=lambda on: None)


def _mod_random_seed(name):
    return _s._fallback(name, {"set_random_seed": nd.random.set_seed,
                               "set_seed": nd.random.set_seed}, na_default=True)


def _mod_tf_compat(name):
    # forward_compatible(y, m, d): whether this build has the behaviour TF added on that
    # date; nbdata follows current TF 2.x
    return _s._fallback(name, {"forward_compatible": lambda *a, **k: True},
                        na_default=True)


def _mod_parsing_ops(name):
    return _s._fallback(name, {"FixedLenFeature": nd.io.FixedLenFeature,
                               "VarLenFeature": nd.io.VarLenFeature,
                               "parse_single_example": nd.io.parse_single_example,
                               "parse_example": nd.io.parse_example,
                               "decode_csv": nd.io.decode_csv}, nd.io)


def _mod_python_io(name):
    return _s._fallback(name, {"TFRecordWriter": nd.io.TFRecordWriter,
                               "TFRecordOptions": nd.io.TFRecordOptions},
                        v1.python_io)


def _tf_record_iterator(path, options=None):
    """python_io.tf_record_iterator over nbdata's record reader."""
    compression = getattr(options, "compression_type", options) if options is not None else None
    return iter(nd.TFRecordDataset(path, compression_type=compression or None))


class _TFRecordCompressionType:
    NONE, ZLIB, GZIP = "", "ZLIB", "GZIP"


def _mod_tf_record(name):
    return _s._fallback(name, {"TFRecordWriter": nd.io.TFRecordWriter,
                               "TFRecordOptions": nd.io.TFRecordOptions,
                               "TFRecordCompressionType": _TFRecordCompressionType,
                               "tf_record_iterator": _tf_record_iterator},
                        getattr(v1, "python_io", {}), na_default=False)


def _mod_options_lib(name):
    # TF's proto round trip of Options (_to_proto/_from_proto) is not mirrored: N/A
    def to_proto(self):
        _s._na("Options._to_proto (dataset_options proto)")

    def from_proto(self, pb):
        _s._na("Options._from_proto (dataset_options proto)")

    nd.Options._to_proto, nd.Options._from_proto = to_proto, from_proto
    return _s._fallback(name, nd.options, nd, nd.experimental)


ADAPTED_EXP = {
    "tensorflow.python.data.ops.options": _mod_options_lib,
    "tensorflow.python.data.experimental.ops.batching": _mod_batching,
    "tensorflow.python.data.experimental.ops.grouping": _mod_grouping,
    "tensorflow.python.data.experimental.ops.readers": _mod_exp_readers,
    "tensorflow.python.data.experimental.ops.interleave_ops": _mod_interleave_ops,
    "tensorflow.python.data.experimental.ops.shuffle_ops": _mod_shuffle_ops,
    "tensorflow.python.data.experimental.ops.error_ops": _mod_error_ops,
    "tensorflow.python.data.experimental.ops.from_list": _mod_from_list,
    "tensorflow.python.data.experimental.ops.io": _mod_exp_io,
    "tensorflow.python.data.experimental.ops.snapshot": _mod_snapshot,
    "tensorflow.python.data.experimental.ops.writers": _mod_writers,
    "tensorflow.python.data.experimental.ops.pad_to_cardinality": _mod_pad_to_cardinality,
    "tensorflow.python.data.experimental.ops.parsing_ops": _mod_exp_parsing_ops,
    "tensorflow.python.data.experimental.ops.iterator_ops": _mod_exp_iterator_ops,
    "tensorflow.python.data.ops.iterator_ops": _mod_iterator_ops,
    "tensorflow.python.data.ops.optional_ops": _mod_optional_ops,
    "tensorflow.python.data.ops.test_mode": _mod_test_mode,
    "tensorflow.python.framework.random_seed": _mod_random_seed,
    "tensorflow.python.compat.compat": _mod_tf_compat,
    "tensorflow.python.ops.parsing_ops": _mod_parsing_ops,
    "tensorflow.python.lib.io.python_io": _mod_python_io,
    "tensorflow.python.lib.io.tf_record": _mod_tf_record,
}
