"""Own stand-in for TF's tf_record_test_base, written over nbdata (no TF code)."""
import os

import nbdata.compat.v1 as v1

from tfshim import DatasetTestBase, NotApplicable


def _as_bytes(s):
    return s if isinstance(s, bytes) else str(s).encode()


class TFRecordTestBase(DatasetTestBase):

    def setUp(self):
        super().setUp()
        self._num_files = 2
        self._num_records = 7
        self._filenames = self._createFiles()

    def _record(self, f, r):
        return _as_bytes("Record %d of file %d" % (r, f))

    def _createFiles(self):
        names = []
        for i in range(self._num_files):
            fn = os.path.join(self.get_temp_dir(), "tf_record.%d.txt" % i)
            names.append(fn)
            with v1.python_io.TFRecordWriter(fn) as w:
                for j in range(self._num_records):
                    w.write(self._record(i, j))
        return names

    def _writeFile(self, name, data):
        fn = os.path.join(self.get_temp_dir(), name)
        with v1.python_io.TFRecordWriter(fn) as w:
            for d in data:
                w.write(_as_bytes(str(d)))
        return fn


class FeaturesTestBase(DatasetTestBase):

    def setUp(self):
        raise NotApplicable("N/A: FeaturesTestBase (tf.train.Example protos)")
