"""A shim for tools that still call ``setup.py`` (``pip install -e .`` with old pip,
``python setup.py develop``): every piece of metadata lives in ``pyproject.toml``."""

from setuptools import setup

setup()
