"""Loads the `_pto` extension: inside the installed package, or from the build tree.

`pip install .` puts `_pto` inside `pypto/`; in a development checkout the tests
put `build/python` (where CMake writes `_pto`) on PYTHONPATH next to `python/`.
"""
try:
    from . import _pto  # type: ignore[attr-defined]  # installed wheel
except ImportError:  # pragma: no cover - depends on how pypto was installed
    try:
        import _pto  # type: ignore[no-redef]  # build tree on PYTHONPATH
    except ImportError as e:
        raise ImportError(
            "pypto: the _pto extension was not found; build it (scripts/build.sh) and put "
            "build/python on PYTHONPATH, or `pip install .`") from e

__all__ = ["_pto"]
