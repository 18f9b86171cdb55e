"""Pictures of a pipeline (nbdata/compiler/drawing.py): ``explain(format="mermaid"|"dot")``
draws the physical plan (fused stages as clusters of their ops, Python stages marked);
``stats().plot(path)`` draws each stage's busy and waited time and the sink's throughput
over time (matplotlib when installed, else SVG or HTML written by nbdata)."""

import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import nbdata as nd
from nbdata.compiler import drawing
from nbdata.compiler.executor import Timeline

SVG = "{http://www.w3.org/2000/svg}"


def _slow(x):
    # slower than the consumer below (2 ms a batch), so that the consumer waits for the
    # prefetch whatever the machine's load: with 0.5 ms the prefetch could stay ahead
    # from the first batch on, and a suite run once saw no wait at all
    time.sleep(0.003)
    return x


@pytest.fixture(scope="module")
def pipe():
    """range -> map -> batch fused (one kernel), then a Python per-element map, a prefetch."""
    o = nd.Options()
    o.fusion_min_rows = 0
    table = {0: 1, 1: 2, 2: 3}   # a map Numba cannot compile: it runs per element in Python
    p = (nd.Dataset.range(400).map(lambda x: x * 2).batch(20)
         .map(lambda b: _slow(b) * np.int64(table[int(b[0]) % 3]))
         .prefetch(2).with_options(o).compile())
    for _ in range(2):
        for _ in p:
            time.sleep(0.002)
    return p


def _edges(text: str, arrow: str) -> list:
    return re.findall(rf"^\s*(n\d+) {arrow} (n\d+);?$", text, re.M)


def test_explain_as_mermaid_draws_stages_fused_ops_and_python_stages(pipe):
    text = pipe.explain(format="mermaid")
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    boxes = dict(re.findall(r'^\s*(n\d+)\["(.*)"\]$', text, re.M))
    # one cluster: the fused stage's ops in order
    start = lines.index(next(ln for ln in lines if ln.strip().startswith("subgraph")))
    assert "fused stage (one kernel): range -#gt; map -#gt; batch" in lines[start]
    inside = [re.match(r"\s*(n\d+)\[", ln).group(1) for ln in lines[start + 1:start + 4]]
    assert [boxes[b].split("(")[0] for b in inside] == ["range", "map", "batch"]
    assert lines[start + 4].strip() == "end"
    # the data flows from the source to the sink in one chain
    edges = _edges(text, "-->")
    chain = [inside[0]]
    nxt = dict(edges)
    while chain[-1] in nxt:
        chain.append(nxt[chain[-1]])
    assert len(edges) == len(boxes) - 1 and len(chain) == len(boxes)
    assert [boxes[b].split("(")[0] for b in chain] == ["range", "map", "batch", "map",
                                                        "prefetch"]
    python = re.search(r"^\s*class (\S+) python$", text, re.M).group(1).split(",")
    assert python == [chain[3]] and "(per element, in Python)" in boxes[chain[3]]
    assert "<" not in text.replace("<br/>", "")   # Mermaid's entity codes instead


def test_explain_as_dot_is_the_same_graph(pipe):
    text = pipe.explain(format="dot")
    assert text.startswith("digraph pipeline {") and text.endswith("}")
    assert text.count("{") == text.count("}") == 2
    assert _edges(text, "->") == _edges(pipe.explain(format="mermaid"), "-->")
    assert 'subgraph cluster_0 {' in text and 'fillcolor="#fde2c8"' in text
    if shutil.which("dot"):
        done = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    with pytest.raises(ValueError, match="format must be 'text', 'mermaid' or 'dot'"):
        pipe.explain(format="png")
    assert pipe.explain().startswith("== physical plan (sink first) ==")


def test_stats_timelines_hold_what_the_counters_hold(pipe):
    stats = pipe.stats()
    data = drawing.series(stats)
    assert [d["title"] for d in data] == [s.title for s in stats.stages if s.chunks]
    for d, s in zip(data, [s for s in stats.stages if s.chunks]):
        assert sum(r * d["width"] for r in d["rate"]) == pytest.approx(s.rows)
        assert sum(b * d["width"] for b in d["busy"]) == pytest.approx(s.seconds, rel=1e-6)
        assert sum(w * d["width"] for w in d["wait"]) == pytest.approx(s.wait_seconds, rel=1e-6)
        assert d["t"][0] >= 0 and d["unit"] == s.unit
    assert any(d["wait"] and max(d["wait"]) > 0 for d in data)   # the prefetch's consumer


def test_stats_plot_writes_a_self_contained_svg_and_html(pipe, tmp_path):
    stats = pipe.stats()
    path = stats.plot(tmp_path / "stats.svg", matplotlib=False)
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    lines = root.findall(f"{SVG}polyline")
    titles = [s.title for s in stats.stages if s.chunks]
    panels = {(ln.get("data-stage"), ln.get("data-panel")) for ln in lines}
    assert panels == ({(t, "busy") for t in titles} | {(t, "wait") for t in titles}
                      | {(titles[0], "rate")})
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "throughput (batches/s)" in texts and set(titles) <= set(texts)
    page = (tmp_path / "stats.html")
    stats.plot(page, matplotlib=False)
    doc = page.read_text()
    assert doc.startswith("<!DOCTYPE html>") and "<svg" in doc and "src=" not in doc
    assert "batches in" in doc   # the stats text under the picture
    with pytest.raises(ValueError, match="writes .svg or .html"):
        stats.plot(tmp_path / "stats.png", matplotlib=False)
    fresh = nd.Dataset.range(3).compile()
    with pytest.raises(ValueError, match="iterate the pipeline first"):
        fresh.stats().plot(tmp_path / "none.svg")


def test_stats_plot_with_matplotlib(pipe, tmp_path):
    pytest.importorskip("matplotlib")
    path = pipe.stats().plot(tmp_path / "stats.png")
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_timeline_keeps_at_most_max_buckets_and_its_totals():
    t = Timeline()
    t.add(10.0, 10.012, rows=3)
    assert t.origin == 10.0 and len(t.busy) == 3 and t.rows == [0, 0, 3]
    t.add(10.5, 10.6, waited=True)
    t.add(20.0, 21.0, rows=5)            # 11 s: past 512 buckets of 5 ms
    assert len(t.busy) <= Timeline.MAX and t.width == pytest.approx(0.005 * 2 ** 3)
    assert sum(t.busy) == pytest.approx(1.012) and sum(t.wait) == pytest.approx(0.1)
    assert sum(t.rows) == 8 and t.rows[-1] == 5
    t.add(9.0, 9.5)                      # began before the first event: buckets in front
    assert t.origin <= 9.0 and sum(t.busy) == pytest.approx(1.512)
    assert sum(t.rows) == 8 and t.rows[-1] == 5 and len(t.busy) <= Timeline.MAX
    t.add(0.0, 0.1)
    assert t.origin <= 0.0 and sum(t.busy) == pytest.approx(1.612)
    assert len(t.busy) <= Timeline.MAX and t.rows[-1] == 5
