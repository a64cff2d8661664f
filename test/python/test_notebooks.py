"""The notebooks in python/notebooks run end to end (nbclient, the venv's ipykernel)
and their CHECK lines (errors against float64 numpy, the tuner's best installed) hold."""
import os
import re

import nbformat
import pytest
from nbclient import NotebookClient

NB_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "python", "notebooks")


def run_notebook(name, monkeypatch):
    # Figures come back as PNG outputs through the inline backend (headless), whatever
    # MPLBACKEND the test runner has. The kernel inherits PTO_TUNING_DB (conftest: a fresh
    # database per test), so tuning measures every trial instead of resuming.
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(os.path.join(NB_DIR, name), as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": NB_DIR}}).execute()
    text = ""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text += out.get("text", "")
    checks = dict(re.findall(r"^CHECK (\S+) (.+)$", text, re.M))
    return checks, text, nb


def test_matmul_notebook(monkeypatch):
    checks, text, nb = run_notebook("matmul_schedule.ipynb", monkeypatch)
    print(checks)
    tol = 256 * 2**-24  # f32 accumulation over K = 256 terms (see the notebook)
    for k in ("default_rel_err", "hand_rel_err", "tuned_rel_err", "exported_rel_err"):
        assert float(checks[k]) <= tol, k
    assert checks["tuned_is_confirmed_best"] == "True"
    assert checks["peaks_positive"] == "True"
    assert float(checks["hand_speedup"]) > 0
    assert "openblas" in text and "for i" in text  # the comparison table and a loop nest were printed
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 2  # tuning curve and roofline


def test_bert_attention_notebook(monkeypatch):
    checks, text, nb = run_notebook("bert_attention.ipynb", monkeypatch)
    print(checks)
    assert float(checks["f32_max_abs_err"]) < 1e-4
    assert float(checks["bf16_max_abs_err"]) < 0.15
    assert float(checks["tuned_max_abs_err"]) < 1e-4
    assert checks["tuned_is_confirmed_best"] == "True"
    assert checks["pipeline_matches"] == "True"
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 2  # stage bars and tuning curve


def test_debugging_notebook(monkeypatch):
    checks, text, nb = run_notebook("debugging.ipynb", monkeypatch)
    print(checks)
    assert checks["located_stage"] == "True"
    assert checks["bisect_stage"] == "True" and checks["bisect_field"] == "True"
    assert checks["stages_profiled"] == "True"
    assert checks["memory_error"] == "True"
    assert checks["sharded"] == "True"
    assert "<- culprit" in text and "opt level 0" in text
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 1  # the per-stage profile
