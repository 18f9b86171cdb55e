"""CRC32C throughput on one 64 MB buffer: nbdata's kernel (the CPU's crc32 instruction
where present, its table fallback) against the `crc32c` and `google-crc32c` packages."""

from __future__ import annotations

import time

import numpy as np

SIZE_MB = 64
QUICK_MB = 8


def _best(fn, data, repeats: int) -> tuple[float, int]:
    value = fn(data)  # warm-up (and compilation) untimed
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(data)
        best = min(best, time.perf_counter() - start)
    return best, int(value)


def _rows():
    """(name, function of a uint8 array, module it needs or None)."""
    from nbdata.kernels import crc32c as k

    def hardware(a):
        return k.crc32c(a, 0, len(a))

    def table(a):
        return k.crc32c_update_table(np.uint32(0xFFFFFFFF), a, 0, len(a)) ^ np.uint32(0xFFFFFFFF)

    def crc32c_package(a):
        import crc32c
        return crc32c.crc32c(a)

    def google_crc32c(a):
        import google_crc32c
        return google_crc32c.value(a)

    label = "crc32 instruction" if k.HARDWARE else "no crc32 instruction here: table"
    return [(f"nbdata crc32c ({label})", hardware, None),
            ("nbdata table fallback (slicing-by-8)", table, None),
            ("crc32c package (crc32c.crc32c) [base]", crc32c_package, "crc32c"),
            ("google-crc32c (google_crc32c.value) [b]", google_crc32c, "google_crc32c")]


def report(header: str, quick: bool, load, repeats: int = 5) -> str:
    import importlib.util
    size = (QUICK_MB if quick else SIZE_MB) << 20
    data = np.random.default_rng(4).integers(0, 256, size, dtype=np.uint8)
    measured = []
    for name, fn, needs in _rows():
        if needs and importlib.util.find_spec(needs) is None:
            measured.append((name, None, None, f"skipped: {needs} not installed (pip install "
                                               f"-r perf/requirements.txt)"))
            continue
        # [b] takes only bytes: converted once, untimed.
        seconds, value = _best(fn, data.tobytes() if "[b]" in name else data, repeats)
        measured.append((name, seconds, value, ""))
    values = {v for _, s, v, _ in measured if s is not None}
    base = next((s for n, s, _, _ in measured if "[base]" in n and s is not None), None)
    cols = ("implementation", "GB/s", "time ms", "vs crc32c package", "note")
    body = []
    for name, seconds, value, note in measured:
        if seconds is None:
            body.append((name, "-", "-", "-", note))
            continue
        ratio = f"{base / seconds:.2f}x" if base else "-"
        body.append((name, f"{size / seconds / 1e9:.2f}", f"{seconds * 1e3:.2f}", ratio, note))
    widths = [max(len(c), *(len(r[i]) for r in body)) for i, c in enumerate(cols)]

    def render(row):
        return "  ".join(f"{v:{'<' if i in (0, 4) else '>'}{w}}"
                         for i, (v, w) in enumerate(zip(row, widths))).rstrip()

    lines = [f"== CRC32C of one {size >> 20} MB buffer, single thread, best of {repeats} ==",
             f"{header}; {load.describe()}", render(cols), "  ".join("-" * w for w in widths)]
    lines.extend(render(r) for r in body)
    lines.append("every implementation gave the same value" if len(values) == 1
                 else f"VALUES DIFFER: {sorted(values)}")
    return "\n".join(lines)
