"""tf.data's TFRecordWriter(path).write(dataset): argument checks and a scalar string
tensor as the file name (as a group_by_window reduce function builds one)."""
import numpy as np
import pytest

import nbdata as nd
import nbdata.compat.v1 as v1


def test_compat_v1_name_is_the_dataset_writer(tmp_path):
    path = str(tmp_path / "r.tfrecord")
    v1.data.experimental.TFRecordWriter(path).write(nd.Dataset.from_list([b"a", b"bc"]))
    assert list(nd.TFRecordDataset(path)) == [b"a", b"bc"]


def test_not_a_dataset_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="TFRecordWriter.write"):
        nd.experimental.TFRecordWriter(str(tmp_path / "r"), "").write("whoops")


@pytest.mark.parametrize("ds", [nd.Dataset.from_tensors(10),
                                nd.Dataset.from_tensors(np.array([[b"a"], [b"b"]], dtype=object))])
def test_non_scalar_string_elements_are_a_type_error(tmp_path, ds):
    with pytest.raises(TypeError, match="scalar strings"):
        nd.experimental.TFRecordWriter(str(tmp_path / "r"), "").write(ds)


def test_scalar_string_tensor_file_name(tmp_path):
    name = np.array(str(tmp_path / "s.tfrecord").encode(), dtype=object)
    nd.experimental.TFRecordWriter(name).write(nd.Dataset.from_list([b"x"]))
    assert list(nd.TFRecordDataset(str(tmp_path / "s.tfrecord"))) == [b"x"]
