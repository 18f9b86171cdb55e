"""Fixtures shared by the nd.train tests: a fresh default graph, and TensorFlow's v1 API
for the differential tests (skipped where tensorflow is not installed)."""

import os

import pytest

import nbdata as nd


@pytest.fixture
def graph():
    g = nd.Graph()
    with g.as_default():
        yield g


@pytest.fixture(scope="module")
def tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = pytest.importorskip("tensorflow").compat.v1
    tf.logging.set_verbosity(tf.logging.ERROR)   # the queue API's deprecation warnings
    return tf


@pytest.fixture(scope="module")
def tf1(tf):
    return tf
