"""Pictures of a pipeline: its physical plan as a graph (``pipe.explain(format="mermaid")``
or ``"dot"``: stages, the ops fused into each stage, which stages run per element in
Python) and what its stages did over time (``pipe.stats().plot(path)``: each stage's busy
share, the consumer's waits on background stages, the throughput at the sink), drawn
with matplotlib when it is installed, else written as a self-contained SVG or HTML file.
"""

from __future__ import annotations

import html
import os

GRAPH_FORMATS = ("mermaid", "dot")


# ------------------------------------------------------------------ the plan as a graph
def _graph(physical) -> tuple[list, list, list]:
    """(boxes, clusters, edges): boxes (id, label, python) of the plan, sources first;
    clusters (title, [box ids]) of fused stages, their ops in order; edges (from, to) in
    the direction the data flows."""
    boxes: list = []
    clusters: list = []
    edges: list = []
    seen: dict = {}

    def visit(node) -> tuple[str, str]:
        """Draws ``node`` (once); (first box, last box) it spans."""
        if id(node) in seen:
            return seen[id(node)]
        ins = [visit(child) for child in node.inputs]
        plan = getattr(node, "plan", None)
        if node.op == "fused_stage" and plan is not None:
            labels = [plan.source.describe()] + [s.label for s in plan.steps]
            if plan.terminal is not None:
                labels.append(plan.terminal.node.describe())
            ids = []
            for label in labels:
                ids.append(f"n{len(boxes)}")
                boxes.append((ids[-1], label, False))
            edges.extend(zip(ids, ids[1:]))
            clusters.append((plan.title().replace("fused stage: ", "fused stage (one kernel): "),
                             ids))
            span = (ids[0], ids[-1])
        else:
            box = f"n{len(boxes)}"
            why = node.per_element()
            boxes.append((box, node.describe(), why is not None))
            span = (box, box)
        for _, last in ins:
            edges.append((last, span[0]))
        seen[id(node)] = span
        return span

    visit(physical)
    return boxes, clusters, edges


def _mermaid_text(text: str) -> str:
    return (text.replace("&", "#38;").replace('"', "#quot;").replace("<", "#lt;")
            .replace(">", "#gt;"))


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def plan_graph(physical, fmt: str) -> str:
    """The physical plan ``physical`` as Mermaid flowchart or Graphviz DOT text: a box
    per op, fused stages as clusters of their ops, data flowing from the sources down
    to the sink; a stage that runs per element in Python is marked so."""
    if fmt not in GRAPH_FORMATS:
        raise ValueError(f"explain: format must be 'text', 'mermaid' or 'dot', got {fmt!r}")
    boxes, clusters, edges = _graph(physical)
    in_cluster = {box for _, ids in clusters for box in ids}
    label = {box: text + ("\n(per element, in Python)" if python else "")
             for box, text, python in boxes}
    python = [box for box, _, py in boxes if py]
    if fmt == "mermaid":
        lines = ["flowchart TD"]
        for box, _, _ in boxes:
            if box not in in_cluster:
                lines.append(f'  {box}["{_mermaid_text(label[box]).replace(chr(10), "<br/>")}"]')
        for k, (title, ids) in enumerate(clusters):
            lines.append(f'  subgraph s{k}["{_mermaid_text(title)}"]')
            lines += [f'    {box}["{_mermaid_text(label[box])}"]' for box in ids]
            lines.append("  end")
        lines += [f"  {a} --> {b}" for a, b in edges]
        if python:
            lines.append("  classDef python fill:#fde2c8,stroke:#c0661b")
            lines.append(f"  class {','.join(python)} python")
        return "\n".join(lines)
    lines = ["digraph pipeline {", "  rankdir=TB;",
             '  node [shape=box, fontname="monospace", fontsize=10];']
    for box, _, py in boxes:
        if box not in in_cluster:
            style = ', style=filled, fillcolor="#fde2c8"' if py else ""
            lines.append(f'  {box} [label="{_dot_text(label[box])}"{style}];')
    for k, (title, ids) in enumerate(clusters):
        lines.append(f"  subgraph cluster_{k} {{")
        lines.append(f'    label="{_dot_text(title)}"; style=filled; fillcolor="#e3eefc";')
        lines += [f'    {box} [label="{_dot_text(label[box])}"];' for box in ids]
        lines.append("  }")
    lines += [f"  {a} -> {b};" for a, b in edges]
    lines.append("}")
    return "\n".join(lines)


# ------------------------------------------------------------------ stats over time
def series(stats) -> list[dict]:
    """Per stage (sink first) the time series of its timeline: ``title``, ``unit``,
    ``t`` (each bucket's start, seconds since the first event of any stage), ``width``,
    ``busy`` (share of the bucket spent producing, inputs included), ``wait`` (share
    its consumer waited on it) and ``rate`` (elements or batches produced per second)."""
    found = [(s, s.timeline) for s in stats.stages if s.timeline.origin is not None]
    if not found:
        return []
    start = min(t.origin for _, t in found)
    out = []
    for s, t in found:
        n = len(t.busy)
        out.append({"title": s.title, "unit": s.unit, "width": t.width,
                    "t": [t.origin - start + i * t.width for i in range(n)],
                    "busy": [b / t.width for b in t.busy],
                    "wait": [w / t.width for w in t.wait],
                    "rate": [r / t.width for r in t.rows]})
    return out


_PANELS = (("busy", "busy (share of time producing, inputs included)"),
           ("wait", "consumer waiting on it (share of time)"),
           ("rate", "throughput ({unit}/s)"))
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")


def plot_stats(stats, path: str, matplotlib: bool | None = None) -> str:
    """Draws ``stats`` (a :class:`PipelineStats`) over time into ``path``: with
    matplotlib when it is installed (``matplotlib=None``; any format it writes), else
    as SVG (``.svg``) or HTML (``.html``: the SVG and the stats text). Returns the path."""
    data = series(stats)
    if not data:
        raise ValueError("stats().plot: no stage has produced anything yet: iterate the "
                         "pipeline first")
    ext = os.path.splitext(str(path))[1].lower()
    if matplotlib is None:
        try:
            import matplotlib as _mpl   # noqa: F401
            matplotlib = ext != ".html"
        except ImportError:
            matplotlib = False
    if matplotlib:
        return _plot_matplotlib(data, str(path))
    if ext not in (".svg", ".html", ".htm"):
        raise ValueError(f"stats().plot: {path!r}: without matplotlib nbdata writes .svg or "
                         f".html files (pip install matplotlib for other formats)")
    svg = _svg(data)
    if ext == ".svg":
        text = '<?xml version="1.0" encoding="UTF-8"?>\n' + svg
    else:
        text = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>nbdata pipeline "
                "stats</title></head>\n<body style=\"font-family:sans-serif\">\n<h3>nbdata "
                "pipeline stats</h3>\n" + svg + "\n<pre>" + html.escape(repr(stats)) +
                "</pre>\n</body></html>\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)


def _plot_matplotlib(data: list, path: str) -> str:
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    for ax, (key, title) in zip(axes, _PANELS):
        for k, d in enumerate(data):
            if key == "rate" and k:
                break   # the throughput of the sink only
            ax.step(d["t"], d[key], where="post", label=d["title"],
                    color=_COLORS[k % len(_COLORS)])
        ax.set_ylabel(title.format(unit=data[0]["unit"]), fontsize=8)
    axes[0].legend(fontsize=7, loc="upper right")
    axes[-1].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _svg(data: list) -> str:
    width, panel, left, top, gap = 900, 160, 70, 30, 50
    height = top + 3 * (panel + gap) + 20 * len(data) + 20
    end = max(d["t"][-1] + d["width"] for d in data) or 1.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    plot_w = width - left - 20
    for p, (key, title) in enumerate(_PANELS):
        y0 = top + p * (panel + gap)
        shown = data[:1] if key == "rate" else data
        peak = max((max(d[key]) for d in shown if d[key]), default=0.0)
        peak = peak if key == "rate" else max(1.0, peak)
        peak = peak or 1.0
        out.append(f'<text x="{left}" y="{y0 - 8}" font-weight="bold">'
                   f'{html.escape(title.format(unit=data[0]["unit"]))}</text>')
        out.append(f'<rect x="{left}" y="{y0}" width="{plot_w}" height="{panel}" fill="none" '
                   f'stroke="#999"/>')
        out.append(f'<text x="{left - 6}" y="{y0 + 10}" text-anchor="end">{peak:,.3g}</text>')
        out.append(f'<text x="{left - 6}" y="{y0 + panel}" text-anchor="end">0</text>')
        out.append(f'<text x="{left + plot_w}" y="{y0 + panel + 14}" text-anchor="end">'
                   f'{end:.3g} s</text>')
        for k, d in enumerate(shown):
            points = []
            for t, v in zip(d["t"], d[key]):
                x0 = left + plot_w * t / end
                x1 = left + plot_w * min(end, t + d["width"]) / end
                y = y0 + panel - panel * min(v, peak) / peak
                points += [f"{x0:.1f},{y:.1f}", f"{x1:.1f},{y:.1f}"]
            out.append(f'<polyline class="series" data-stage="{html.escape(d["title"])}" '
                       f'data-panel="{key}" fill="none" stroke="{_COLORS[k % len(_COLORS)]}" '
                       f'stroke-width="1.5" points="{" ".join(points)}"/>')
    y = top + 3 * (panel + gap) - 10
    for k, d in enumerate(data):
        out.append(f'<rect x="{left}" y="{y + 20 * k - 9}" width="12" height="10" '
                   f'fill="{_COLORS[k % len(_COLORS)]}"/>')
        out.append(f'<text x="{left + 18}" y="{y + 20 * k}">{html.escape(d["title"])}</text>')
    out.append("</svg>")
    return "\n".join(out)
