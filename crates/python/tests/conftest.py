"""Fixtures of shale's Python tests: a fresh store in a temporary directory per test."""

import pytest

import shale

# Small memtables and cache: stores open fast and flushes happen within a test's data.
SMALL = {"write_buffer_size": 256 << 10, "block_cache_size": 1 << 20}


@pytest.fixture
def path(tmp_path):
    return tmp_path / "store"


@pytest.fixture
def db(path):
    store = shale.Db(path, **SMALL)
    yield store
    store.close()
