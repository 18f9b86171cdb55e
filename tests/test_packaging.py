"""Packaging as the ecosystem expects: pyproject.toml is the one place of metadata (a
setup.py shim beside it adds none), the license is an SPDX expression, and each
optional dependency's absence is reported naming the extra that installs it."""

import ast
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_holds_the_metadata_and_setup_py_is_a_shim():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "Apache-2.0"   # PEP 639: no deprecated table
    setuptools = [r for r in meta["build-system"]["requires"] if r.startswith("setuptools")]
    assert setuptools == ["setuptools>=77"]   # the first release that reads SPDX licenses
    tree = ast.parse((ROOT / "setup.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert [c.func.id for c in calls] == ["setup"] and not calls[0].args and not calls[0].keywords


def _without(module: str, code: str) -> str:
    """Runs ``code`` in a fresh process where ``module`` cannot be imported; its output."""
    script = f"import sys\nsys.modules[{module!r}] = None\n" + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    return done.stdout + done.stderr


@pytest.mark.parametrize("module, code, extra", [
    ("simplejpeg", """
        import numpy as np, nbdata as nd
        try:
            nd.image.encode_jpeg(np.zeros((2, 2, 3), np.uint8))
        except nd.errors.OpError as e:
            print(type(e).__name__, e)
        """, "nbdata[image]"),
    ("PIL", """
        import nbdata as nd
        try:
            nd.image.decode_png(b"\\x89PNG\\r\\n\\x1a\\n" + bytes(40))
        except nd.errors.OpError as e:
            print(type(e).__name__, e)
        """, "nbdata[image]"),
    ("ray", """
        import nbdata as nd
        from nbdata.distribute.cluster import ray_module
        try:
            ray_module()
        except nd.errors.OpError as e:
            print(type(e).__name__, e)
        """, "nbdata[distributed]"),
])
def test_a_missing_optional_dependency_names_its_extra(module, code, extra):
    out = _without(module, code)
    assert extra in out and "Error" in out, out
