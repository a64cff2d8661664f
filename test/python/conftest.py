"""pytest set-up: import pypto from the source tree and _pto from the build tree.

ctest sets PYTHONPATH; this fallback lets `pytest test/python` work from a
checkout with the default build directory too.
"""
import os
import sys

import numpy as np
import pytest

_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for p in (os.path.join(_root, "python"), os.path.join(os.environ.get("PTO_BUILD_DIR", os.path.join(_root, "build")), "python")):
    if p not in sys.path:
        sys.path.insert(0, p)
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def tuning_db(tmp_path, monkeypatch):
    """A fresh tuning database per test: tuning never reads or writes the user's, nor resumes."""
    path = str(tmp_path / "tuning.db")
    monkeypatch.setenv("PTO_TUNING_DB", path)
    return path
