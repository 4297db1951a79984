"""Getting the user's handler module to the executors.

Executors import what is installed in their Python; a handler that lives in
the current directory (``handlers.py``, or a package ``myapp/``) is not, and
the driver's ``sys.path`` never reaches them. So the driver finds the file of
each top-level module the handler and ``worker_init`` come from and, unless it
is installed (under site-packages), ships it with ``SparkContext.addPyFile``:
a module file as is, a package as a zip of its directory. This works the same
for ``local[*]`` and for ``spark://`` masters.
"""

from __future__ import annotations

import importlib
import os
import site
import sysconfig
import zipfile
from pathlib import Path
from typing import Iterable


def _installed_roots() -> list[Path]:
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], sysconfig.get_paths()["stdlib"]}
    try:
        roots.update(site.getsitepackages())
    except AttributeError:
        pass
    return [Path(r).resolve() for r in roots if r]


def _is_installed(path: Path) -> bool:
    return any(root == path or root in path.parents for root in _installed_roots())


def top_level_source(module_name: str) -> Path | None:
    """The file (plain module) or directory (package) of ``module_name``'s top-level module, or None
    when it is built in, installed, or rmqrun itself (executors have rmqrun from the ``spark`` extra)."""
    top = module_name.split(".")[0]
    if top == "rmqrun":
        return None
    module = importlib.import_module(top)
    file = getattr(module, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    source = path.parent if path.name == "__init__.py" else path
    if _is_installed(source) or source.suffix not in ("", ".py"):
        return None
    return source


def _zip_package(directory: Path, into: Path) -> Path:
    target = into / f"{directory.name}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for root, dirs, files in os.walk(directory):
            dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
            for name in files:
                if name.endswith((".pyc", ".pyo")):
                    continue
                full = Path(root) / name
                zf.write(full, full.relative_to(directory.parent))
    return target


def files_to_ship(refs: Iterable[str | None], workdir: Path) -> list[str]:
    """Paths for ``addPyFile`` covering the modules of ``refs`` (``module:function``), zips made in ``workdir``."""
    out: list[str] = []
    seen: set[Path] = set()
    for ref in refs:
        if not ref:
            continue
        source = top_level_source(ref.partition(":")[0].strip())
        if source is None or source in seen:
            continue
        seen.add(source)
        out.append(str(_zip_package(source, workdir) if source.is_dir() else source))
    return out
