"""One exception root: every exception class rmqrun defines derives from :class:`rmqrun.errors.RmqrunError`.

Every module of the ``rmqrun`` package is imported (pyspark is installed for the tests, so the Spark modules
load too; an import that fails fails the test, nothing is skipped), then every subclass of ``BaseException``
defined in an ``rmqrun`` module is checked. A failure lists each offender with its bases. The classes that
stand outside the tree on purpose are named in :data:`OUTSIDE_THE_ROOT`, each with its reason.

Beside it: no ``raise RuntimeError(...)`` / ``raise Exception(...)`` in ``rmqrun/`` (outside ``cli/``, which
its own owners re-root): a failure rmqrun raises on purpose has a class a caller can catch by name.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import rmqrun
from rmqrun.errors import RmqrunError

PACKAGE_DIR = Path(rmqrun.__file__).resolve().parent

#: Exception classes deliberately outside the RmqrunError tree: "module.Class" -> why.
OUTSIDE_THE_ROOT: dict[str, str] = {
    "rmqrun.handler.results.WorkerTerminated":
        "a control-flow signal raised inside a handler on SIGTERM, a BaseException so that a handler's "
        "`except Exception` cannot swallow it and keep the worker from stopping (rmqrun/errors.py)",
}

#: Where a bare ``raise RuntimeError(`` / ``raise Exception(`` is still allowed (another change re-roots them).
BARE_RAISE_EXEMPT = ("cli/",)


def module_names(root: Path = PACKAGE_DIR) -> list[str]:
    names = []
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def exception_classes(prefix: str = "rmqrun") -> list[type[BaseException]]:
    """Every subclass of BaseException whose module is ``prefix`` or under it (walks the live class tree)."""
    found: list[type[BaseException]] = []
    seen: set[type] = set()
    todo: list[type] = [BaseException]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub in seen:
                continue
            seen.add(sub)
            todo.append(sub)
            module = getattr(sub, "__module__", "")
            if module == prefix or module.startswith(prefix + "."):
                found.append(sub)
    return sorted(found, key=qualified)


def qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def offenders(classes: list[type[BaseException]], outside: dict[str, str] = OUTSIDE_THE_ROOT) -> list[str]:
    """The classes that neither derive from RmqrunError nor are listed as outside it on purpose."""
    return [f"{qualified(c)}({', '.join(b.__name__ for b in c.__bases__)})"
            for c in classes if not issubclass(c, RmqrunError) and qualified(c) not in outside]


def bare_raises(root: Path = PACKAGE_DIR, exempt: tuple[str, ...] = BARE_RAISE_EXEMPT) -> list[str]:
    """``raise RuntimeError(...)`` / ``raise Exception(...)`` (or without a call) in the package, as path:line."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(exempt):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(exc, ast.Name) and exc.id in ("RuntimeError", "Exception"):
                    found.append(f"{root.name}/{rel}:{node.lineno}: raise {exc.id}")
    return found


def test_every_rmqrun_exception_derives_from_the_root() -> None:
    for name in module_names():
        importlib.import_module(name)  # no try: a module that cannot be imported is not checked, so it fails
    classes = exception_classes()
    # the walk sees classes of every family, so an empty or partial walk cannot pass quietly
    names = {qualified(c) for c in classes}
    assert {"rmqrun.errors.RmqrunError", "rmqrun.broker.store.errors.StoreError", "rmqrun.spark.errors.OptionError",
            "rmqrun.handler.results.WorkerTerminated"} <= names
    bad = offenders(classes)
    assert not bad, ("exception classes outside rmqrun.errors.RmqrunError (derive from it, keeping any standard "
                     "base callers catch, or list it in OUTSIDE_THE_ROOT with the reason):\n  " + "\n  ".join(bad))


def test_the_classes_outside_the_root_exist_and_are_really_outside() -> None:
    """A stale entry (renamed, or re-rooted after all) would hide a future offender of the same name."""
    for name in OUTSIDE_THE_ROOT:
        module, _, attr = name.rpartition(".")
        cls = getattr(importlib.import_module(module), attr)
        assert isinstance(cls, type) and issubclass(cls, BaseException) and not issubclass(cls, RmqrunError), name


def test_standard_bases_callers_catch_are_kept() -> None:
    """Re-rooting must not take away a base that users, Spark or rmqrun's own code catch the class by."""
    from rmqrun.broker.acl.addresses import AddressPatternError
    from rmqrun.broker.acl.config import AclConfigError
    from rmqrun.broker.app import EmbeddedBrokerError
    from rmqrun.broker.store.errors import MessageTooLargeError, RecordFormatError, StoreIOError
    from rmqrun.handler.outcome import BadResultError
    from rmqrun.handler.results import SoftTimeLimitExceeded, WorkerTerminated
    from rmqrun.pipe.wire import WireError
    from rmqrun.pull.errors import WrongCallerError
    from rmqrun.spark import SparkSupportMissing
    from rmqrun.spark.errors import OptionError, SourceError
    from rmqrun.spark.task import PartitionFailedError, RetrySendError

    for cls, base in [(AddressPatternError, ValueError), (AclConfigError, ValueError), (WireError, ValueError),
                      (MessageTooLargeError, ValueError), (RecordFormatError, ValueError), (OptionError, ValueError),
                      (StoreIOError, OSError), (BadResultError, TypeError), (SparkSupportMissing, RuntimeError),
                      (SourceError, RuntimeError), (RetrySendError, RuntimeError), (WrongCallerError, RuntimeError),
                      (PartitionFailedError, RuntimeError), (EmbeddedBrokerError, RuntimeError),
                      (SoftTimeLimitExceeded, Exception)]:
        assert issubclass(cls, base) and issubclass(cls, RmqrunError), cls
    assert not issubclass(WorkerTerminated, Exception)  # a handler's `except Exception` must not catch it


def test_no_bare_runtime_error_or_exception_is_raised() -> None:
    bad = bare_raises()
    assert not bad, "give each a named class under rmqrun.errors.RmqrunError:\n  " + "\n  ".join(bad)


# ---------------------------------------------------------------- the checkers themselves (so the above cannot
# pass vacuously)

def test_the_checker_flags_a_made_up_class_outside_the_root() -> None:
    class Rooted(RmqrunError, ValueError):
        pass

    class Stray(ValueError):
        pass

    class Signal(BaseException):
        pass

    # a module name outside "rmqrun.", so these never show in the real check (they live on in __subclasses__)
    Rooted.__module__ = Stray.__module__ = Signal.__module__ = "rmqrun_made_up"
    found = exception_classes("rmqrun_made_up")
    assert {c.__name__ for c in found} == {"Rooted", "Stray", "Signal"}
    name = "rmqrun_made_up." + Signal.__qualname__
    assert offenders(found, {name: "a signal"}) == [f"rmqrun_made_up.{Stray.__qualname__}(ValueError)"]
    assert len(offenders(found, {})) == 2


def test_the_checker_flags_a_bare_raise(tmp_path: Path) -> None:
    pkg = tmp_path / "rmqrun"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "a.py").write_text("def f():\n    raise RuntimeError('x')\n\n\ndef g():\n    raise Exception\n"
                              "\n\ndef h():\n    raise ValueError('fine')\n")
    (pkg / "cli" / "b.py").write_text("raise RuntimeError('exempt')\n")
    assert bare_raises(pkg) == ["rmqrun/a.py:2: raise RuntimeError", "rmqrun/a.py:6: raise Exception"]
