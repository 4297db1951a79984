"""Load a file of ``scripts/`` as a module for its tests (the scripts are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def load_script(name: str, as_name: str | None = None) -> ModuleType:
    """``scripts/<name>.py`` executed afresh as module ``as_name`` (default ``<name>_under_test``).

    The module is registered in ``sys.modules`` before it runs: dataclasses look their module up there.
    """
    module = as_name or f"{name}_under_test"
    spec = importlib.util.spec_from_file_location(module, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    spec.loader.exec_module(mod)
    return mod
