"""Fixtures of the harness tests: a private Iron cache per test, and the throwaway faulting entries."""

from __future__ import annotations

import importlib
import sys

import pytest

from iron.harness.registry import unregister


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def broken_kernels():
    """The entries of ``faulty_kernels`` (registered when it is imported, so the bench's workers see them too),
    registered for the duration of the test."""
    module = importlib.import_module(".faulty_kernels", __package__)
    yield module
    for name in module.NAMES:
        unregister(name)
    sys.modules.pop(module.__name__, None)
