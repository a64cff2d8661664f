"""Every operator type in the library has a float64 test: its name is a case
of one of the table-driven C++ operator tests (test/cpp/test_ops_*.cpp, each
case checked against a float64 reference and the interpreter). The registry
test's list of small valid inputs builds every row but checks no values, so
it does not count."""
import pathlib
import re

import pypto

CPP = pathlib.Path(__file__).resolve().parents[1] / "cpp"


def _float64_cases() -> str:
    text = ""
    for f in sorted(CPP.glob("test_ops_*.cpp")):
        src = f.read_text()
        # The registry test (builds every row on small inputs, checks no values).
        src = re.sub(r'TEST_CASE\("every operator table row.*?\n}\n', "", src, flags=re.S)
        text += src
    return text


# Operators whose float64 test is a file of its own.
OWN_FILE = {"conv2d_nhwc": "test_conv_nhwc.cpp"}


def test_every_operator_type_has_a_float64_case():
    text = _float64_cases()
    names = [n for n, _, _ in pypto.ops.registry()]
    assert len(names) >= 200
    for n, f in OWN_FILE.items():
        assert n in (CPP / f).read_text() and "float64" in (CPP / f).read_text()
    missing = [n for n in names if n not in OWN_FILE and not re.search(r'\{\s*"%s",' % re.escape(n), text)]
    assert not missing, f"operators without a float64 case in test/cpp/test_ops_*.cpp: {missing}"
