"""The inflater fixture of the compressed-file tests: each test runs with the standard
zlib, then with isal's (the [gzip] extra) when installed."""

import zlib

import pytest

from nbdata.kernels import files


def _inflaters():
    out = [pytest.param(zlib, id="zlib")]
    try:
        from isal import isal_zlib
        out.append(pytest.param(isal_zlib, id="isal"))
    except ImportError:
        pass
    return out


@pytest.fixture(params=_inflaters())
def inflater(request, monkeypatch):
    """Reads with the standard zlib, then with isal's (the [gzip] extra) when installed."""
    module = request.param
    monkeypatch.setattr(files, "INFLATE", module)
    monkeypatch.setattr(files, "INFLATE_ERRORS",
                        (zlib.error, getattr(module, "error", zlib.error)))
    return module
