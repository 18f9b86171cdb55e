"""make_csv_dataset(encoding=...): the header and the rows used for type inference are
read in the files' encoding; string values stay the files' bytes."""
import nbdata as nd


def test_shift_jis_header_and_values(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes("名前,数\nさる,1\nとり,2".encode("shift-jis"))
    ds = nd.experimental.make_csv_dataset(str(path), 1, num_epochs=1, shuffle=False,
                                          encoding="shift-jis")
    rows = [(bytes(b["名前"][0]), int(b["数"][0])) for b in ds]
    assert rows == [("さる".encode("shift-jis"), 1), ("とり".encode("shift-jis"), 2)]


def test_default_encoding_is_utf8(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes("é,n\nà,1".encode("utf-8"))
    b = next(iter(nd.experimental.make_csv_dataset(str(path), 1, num_epochs=1,
                                                   shuffle=False)))
    assert sorted(b) == ["n", "é"] and bytes(b["é"][0]) == "à".encode("utf-8")
