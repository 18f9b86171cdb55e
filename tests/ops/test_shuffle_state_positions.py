"""A shuffle's saved state over a source that fetches rows by position holds the buffered
rows' positions, not the rows: small, and a restore fetches the rows again."""

import numpy as np
import pytest

import nbdata as nd
from equivalence import resumed

IMAGES = 12_000
BUFFER = 10_000


def images():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (IMAGES, 64, 64, 3), dtype=np.uint8)
    x[:, 0, 0, 0] = np.arange(IMAGES) % 256   # rows told apart by the labels below
    return x


def check_restore(ds, taken=40, batch=64):
    """Saves after ``taken`` batches; returns the state's size. The restored iterator
    gives what the uninterrupted one gives after that point."""
    expected, rest, state = resumed(ds.batch(batch).compile(), taken)
    assert len(rest) == len(expected) > 0
    for got, want in zip(rest, expected):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    return len(state)


@pytest.mark.parametrize("fusion", [False, True], ids=["reference", "fused"])
def test_shuffle_of_in_memory_images_saves_positions(fusion):
    # Plain: the buffer shuffle keeps positions. Fused: the kernel gathers at shuffled
    # row numbers, and its chunks end on batch boundaries, so no made rows wait.
    o = nd.Options()
    o.fusion = fusion
    ds = (nd.Dataset.from_tensor_slices((images(), np.arange(IMAGES)))
          .shuffle(BUFFER, seed=3).with_options(o))
    size = check_restore(ds)
    # The buffer's rows are 10,000 x 12 KB = 123 MB; their positions 80 KB.
    assert size < 1_000_000, size


def test_shuffle_of_an_hdf5_dataset_saves_positions(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "images.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=images()[:3000], chunks=(64, 64, 64, 3))
    with h5py.File(path, "r") as f:
        ds = nd.Dataset.from_tensor_slices(f["x"]).shuffle(2000, seed=4)
        size = check_restore(ds, taken=10)
    assert size < 200_000, size   # rows: 2000 x 12 KB = 24.6 MB

