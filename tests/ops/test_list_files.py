"""Dataset.list_files: glob patterns, sorted or shuffled bytes paths."""

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_paths_agree, fusing, reference


@pytest.fixture
def tree(tmp_path):
    names = ["b.txt", "a.txt", "c.csv", "d.txt", "a1.csv"]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    return tmp_path


def _path(root, name):
    return str(root / name).encode()


def test_shuffle_false_yields_sorted_bytes_paths(tree):
    ds = nd.Dataset.list_files(str(tree / "*.txt"), shuffle=False)
    got = list(ds)
    assert got == [_path(tree, n) for n in ("a.txt", "b.txt", "d.txt")]
    assert all(type(p) is bytes for p in got)


def test_element_spec_and_cardinality(tree):
    ds = nd.Dataset.list_files(str(tree / "*.txt"), shuffle=False)
    assert ds.element_spec == nd.TensorSpec((), nd.string)
    assert ds.cardinality() == 3
    shuffled = nd.Dataset.list_files(str(tree / "*.txt"), seed=1)
    assert shuffled.cardinality() == 3


def test_sorted_across_all_patterns(tree):
    patterns = [str(tree / "*.txt"), str(tree / "*.csv")]
    got = list(nd.Dataset.list_files(patterns, shuffle=False))
    expected = sorted(_path(tree, n) for n in ("a.txt", "b.txt", "d.txt", "c.csv", "a1.csv"))
    assert got == expected


def test_pattern_order_does_not_matter_when_sorted(tree):
    p1, p2 = str(tree / "*.csv"), str(tree / "b.*")
    assert list(nd.Dataset.list_files([p1, p2], shuffle=False)) == list(
        nd.Dataset.list_files([p2, p1], shuffle=False)
    )


def test_file_matched_by_two_patterns_appears_twice(tree):
    # TF's MatchingFiles concatenates the matches of every pattern, then sorts.
    patterns = [str(tree / "a*"), str(tree / "*.txt")]
    got = list(nd.Dataset.list_files(patterns, shuffle=False))
    expected = sorted(
        [_path(tree, n) for n in ("a.txt", "a1.csv")]
        + [_path(tree, n) for n in ("a.txt", "b.txt", "d.txt")]
    )
    assert got == expected


def test_one_pattern_without_matches_among_others(tree):
    got = list(nd.Dataset.list_files([str(tree / "*.none"), str(tree / "c.*")], shuffle=False))
    assert got == [_path(tree, "c.csv")]


def test_glob_wildcards(tree):
    assert list(nd.Dataset.list_files(str(tree / "?.txt"), shuffle=False)) == [
        _path(tree, n) for n in ("a.txt", "b.txt", "d.txt")
    ]
    assert list(nd.Dataset.list_files(str(tree / "[ab].txt"), shuffle=False)) == [
        _path(tree, n) for n in ("a.txt", "b.txt")
    ]


def test_literal_path(tree):
    assert list(nd.Dataset.list_files(str(tree / "c.csv"), shuffle=False)) == [_path(tree, "c.csv")]


def test_bytes_pattern(tree):
    got = list(nd.Dataset.list_files(str(tree / "*.csv").encode(), shuffle=False))
    assert got == [_path(tree, "a1.csv"), _path(tree, "c.csv")]


@pytest.fixture
def many(tmp_path):
    for i in range(20):
        (tmp_path / f"f{i:02d}.rec").write_bytes(b"")
    return tmp_path, sorted(_path(tmp_path, f"f{i:02d}.rec") for i in range(20))


def test_default_shuffles_a_permutation(many):
    root, expected = many
    ds = nd.Dataset.list_files(str(root / "*.rec"))
    got = list(ds)
    assert sorted(got) == expected
    assert len(got) == len(set(got)) == 20


def test_shuffle_true_is_a_permutation_and_not_always_sorted(many):
    root, expected = many
    orders = [list(nd.Dataset.list_files(str(root / "*.rec"), shuffle=True, seed=s)) for s in range(3)]
    for order in orders:
        assert sorted(order) == expected
    assert any(order != expected for order in orders)


def test_seed_is_deterministic(many):
    root, _ = many
    a = list(nd.Dataset.list_files(str(root / "*.rec"), seed=42))
    b = list(nd.Dataset.list_files(str(root / "*.rec"), seed=42))
    assert a == b


def test_reference_path_matches(many):
    root, expected = many
    ds = nd.Dataset.list_files(str(root / "*.rec"), shuffle=False)
    assert list(reference(ds)) == assert_paths_agree(ds) == expected


def test_seeded_shuffle_reference_path_matches(many):
    # Fresh datasets each time: a second pass over the same dataset reshuffles.
    root, expected = many
    got = list(fusing(nd.Dataset.list_files(str(root / "*.rec"), seed=3)))
    ref = list(reference(nd.Dataset.list_files(str(root / "*.rec"), seed=3)))
    assert got == ref
    assert sorted(got) == expected


def test_glob_happens_at_construction(tmp_path):
    (tmp_path / "x.dat").write_bytes(b"")
    ds = nd.Dataset.list_files(str(tmp_path / "*.dat"), shuffle=False)
    (tmp_path / "y.dat").write_bytes(b"")
    assert list(ds) == [_path(tmp_path, "x.dat")]


def test_no_match_is_invalid_argument(tmp_path):
    with pytest.raises(nd.errors.InvalidArgumentError, match="No files matched pattern"):
        nd.Dataset.list_files(str(tmp_path / "*.missing"))


def test_no_match_for_any_pattern(tmp_path):
    with pytest.raises(nd.errors.InvalidArgumentError, match="No files matched pattern"):
        nd.Dataset.list_files([str(tmp_path / "*.a"), str(tmp_path / "*.b")], shuffle=False)


def test_identity_map_over_paths(tmp_path):
    for name, body in [("2.bin", b"bb"), ("1.bin", b"a")]:
        (tmp_path / name).write_bytes(body)
    ds = nd.Dataset.list_files(str(tmp_path / "*.bin"), shuffle=False).map(lambda p: p)
    assert list(ds) == [_path(tmp_path, "1.bin"), _path(tmp_path, "2.bin")]


def test_bad_pattern_type(tmp_path):
    with pytest.raises((TypeError, ValueError)):
        nd.Dataset.list_files(123)
    with pytest.raises((TypeError, ValueError)):
        nd.Dataset.list_files(np.arange(3))
