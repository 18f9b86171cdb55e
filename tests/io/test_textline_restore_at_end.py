"""A TextLineDataset position saved after a file's last line restores, also when that
line has no newline (the saved offset is the file's end, not after a ``\\n``); an
offset inside a line is still refused."""

import gzip

import pytest

import nbdata as nd


@pytest.mark.parametrize("gz", [False, True])
def test_restore_after_every_line(tmp_path, gz):
    contents = [b"a\nbb\nccc", b"x\ny"]
    files = []
    for k, b in enumerate(contents):
        p = tmp_path / f"f{k}{'.gz' if gz else ''}"
        p.write_bytes(gzip.compress(b) if gz else b)
        files.append(str(p))
    kind = "GZIP" if gz else None
    lines = [b"a", b"bb", b"ccc", b"x", b"y"]
    for k in range(len(lines) + 1):
        it = iter(nd.io.TextLineDataset(files, compression_type=kind))
        assert [next(it) for _ in range(k)] == lines[:k]
        again = iter(nd.io.TextLineDataset(files, compression_type=kind))
        again.restore(it.save())
        assert list(again) == lines[k:]


def test_an_offset_inside_a_line_is_refused(tmp_path):
    p = tmp_path / "f.txt"
    p.write_bytes(b"aaaa\nbbbb\n")
    it = iter(nd.io.TextLineDataset([str(p)]))
    next(it)
    state = it.save()
    from nbdata import checkpoint
    tree = checkpoint.decode(state)

    def bump(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "offset" and isinstance(value, int) and value == 5:
                    node[key] = 7
                else:
                    bump(value)
        elif isinstance(node, (list, tuple)):
            for v in node:
                bump(v)
    bump(tree)
    again = iter(nd.io.TextLineDataset([str(p)]))
    with pytest.raises(nd.errors.InvalidArgumentError, match="offset"):
        again.restore(checkpoint.encode(tree))
        next(again)
