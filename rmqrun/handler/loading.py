"""Loading a ``module:function`` handler or hook, and declaring its form.

Loading happens once per worker at boot (and once per Spark partition), so a
typo fails the start-up with one precise message (gunicorn's ``import_app`` is
the model: "Failed to find attribute 'x' in 'y'", "did you mean 'a:b'?",
module not found, not callable) instead of failing every message.

Handler forms:

* plain: ``def handle(msg: Message) -> None | result``, called once per message;
* batch: decorated with :func:`batch`, called with a list of up to
  ``consumeMessageBatchMaxSize`` messages. The form is declared, not guessed
  from the signature, so changing the batch size setting can never silently
  hand a list to a function written for one message (a plain handler with a
  batch size > 1 is refused at start-up).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import traceback
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from rmqrun.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])
BATCH_ATTR = "__rmqrun_batch__"
DEFAULT_ATTR = "handle"


class HandlerLoadError(ConfigError):
    """A handler or hook reference cannot be imported or is not usable."""


def batch(fn: F) -> F:
    """Declare a handler that takes a list of messages (``consumeMessageBatchMaxSize`` at most).

    ::

        @rmqrun.batch
        def handle(msgs: list[rmqrun.Message]) -> rmqrun.AckIndex | None: ...
    """
    try:
        setattr(fn, BATCH_ATTR, True)
        return fn
    except (AttributeError, TypeError):  # e.g. a bound method or a builtin
        def wrapper(msgs):  # type: ignore[no-untyped-def]
            return fn(msgs)
        wrapper.__name__ = getattr(fn, "__name__", "batch_handler")
        wrapper.__qualname__ = getattr(fn, "__qualname__", wrapper.__name__)
        setattr(wrapper, BATCH_ATTR, True)
        return wrapper  # type: ignore[return-value]


def is_batch_handler(fn: Callable[..., Any]) -> bool:
    return bool(getattr(fn, BATCH_ATTR, False))


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """What ``worker_init`` / ``worker_exit`` hooks receive (if they take an argument)."""

    worker_id: int
    pid: int


@dataclass(frozen=True, slots=True)
class Handler:
    """A loaded handler: its reference (for messages), the callable, and its form."""

    ref: str
    fn: Callable[..., Any]
    is_batch: bool


# --------------------------------------------------------------------------- loading

def _import_module(module_name: str, ref: str, what: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            hint = ""
            if ":" not in ref and "." in module_name:
                parent, _, last = module_name.rpartition(".")
                try:
                    if hasattr(importlib.import_module(parent), last):
                        hint = f"; did you mean '{parent}:{last}'?"
                except Exception:
                    pass
            raise HandlerLoadError(f"Module '{module_name}' not found for {what} '{ref}'{hint}") from None
        raise HandlerLoadError(
            f"Importing module '{module_name}' for {what} '{ref}' failed: {exc}\n"
            + "".join(traceback.format_exception(exc)).rstrip()) from None
    except (Exception, SystemExit) as exc:
        raise HandlerLoadError(
            f"Importing module '{module_name}' for {what} '{ref}' failed: {type(exc).__name__}: {exc}\n"
            + "".join(traceback.format_exception(exc)).rstrip()) from None


def _close_matches(obj: Any, name: str) -> list[str]:
    names = [n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n, None))]
    return difflib.get_close_matches(name, names, n=3, cutoff=0.6)


def _is_submodule(module_name: str, name: str) -> bool:
    try:
        return importlib.util.find_spec(f"{module_name}.{name}") is not None
    except (ImportError, ValueError):
        return False


def resolve(ref: str, *, what: str = "handler", default_attr: str = DEFAULT_ATTR,
            asyncio: bool | None = False) -> Callable[..., Any]:
    """Import ``module:attr`` (``attr`` may be dotted, e.g. ``mod:obj.method``) and return it.

    ``module`` alone means ``module:<default_attr>``. Raises
    :class:`HandlerLoadError` with a message meant for the person who wrote
    the reference.
    """
    if not isinstance(ref, str) or not ref.strip():
        raise HandlerLoadError(f"The {what} reference is empty; expected 'module:function'")
    ref = ref.strip()
    module_name, sep, attr = ref.partition(":")
    if module_name.endswith(".py") or "/" in module_name or "\\" in module_name:
        dotted = module_name.removesuffix(".py").replace("\\", "/").strip("/").replace("/", ".")
        raise HandlerLoadError(
            f"The {what} '{ref}' is a file path, not a module; did you mean '{dotted}:{attr or default_attr}'?")
    if not module_name:
        raise HandlerLoadError(f"The {what} '{ref}' has no module before ':'; expected 'module:function'")
    if sep and not attr:
        raise HandlerLoadError(f"The {what} '{ref}' has nothing after ':'; expected 'module:function'")
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise HandlerLoadError(f"The {what} '{ref}': '{module_name}' is not a module name")
    attr = attr or default_attr
    if not all(part.isidentifier() for part in attr.split(".")):
        raise HandlerLoadError(
            f"The {what} '{ref}': '{attr}' is not an attribute name (expressions and calls are not supported)")
    module = _import_module(module_name, ref, what)
    obj: Any = module
    done: list[str] = []
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            where = ".".join([module_name, *done]) if done else module_name
            close = _close_matches(obj, part)
            hint = ""
            if close:
                hint = "; did you mean " + " or ".join(
                    f"'{module_name}:{'.'.join([*done, c])}'" for c in close) + "?"
            elif not done and _is_submodule(module_name, part):
                hint = f"; did you mean '{module_name}.{part}:{default_attr}'?"
            raise HandlerLoadError(
                f"Failed to find attribute '{part}' in '{where}' for {what} '{ref}'{hint}") from None
        done.append(part)
    if not callable(obj):
        raise HandlerLoadError(f"The {what} '{ref}' is not callable (its type is {type(obj).__name__})")
    if inspect.isclass(obj):
        raise HandlerLoadError(f"The {what} '{ref}' is a class; give a function (or an instance with __call__)")
    if inspect.isasyncgenfunction(obj):
        raise HandlerLoadError(f"The {what} '{ref}' is an async generator function; it must return, not yield")
    if asyncio is not None and _is_async(obj) != asyncio:
        if asyncio:
            raise HandlerLoadError(
                f"The {what} '{ref}' is a plain function but worker_class is asyncio, which awaits 'async def' "
                f"handlers on an event loop; make it 'async def', or run it with --worker-class threads "
                f"(blocking I/O) or process (CPU-bound)")
        raise HandlerLoadError(
            f"The {what} '{ref}' is an async function; this worker class calls plain functions: "
            f"run it with --worker-class asyncio (and --worker-concurrency N for N calls at once per worker)")
    if inspect.isgeneratorfunction(obj):
        raise HandlerLoadError(f"The {what} '{ref}' is a generator function; it must return, not yield")
    return obj


def _accepts(fn: Callable[..., Any], nargs: int) -> bool:
    try:
        inspect.signature(fn).bind(*([None] * nargs))
    except TypeError:
        return False
    except ValueError:  # no signature available (some builtins): trust the user
        return True
    return True


def _is_async(fn: Any) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


def load_handler(ref: str, *, batch_size: int = 1, asyncio: bool = False) -> Handler:
    """Load the handler ``ref`` and check it fits ``batch_size`` (consumeMessageBatchMaxSize).

    ``asyncio``: the worker awaits its calls on an event loop, so the handler must be ``async def``;
    otherwise it must be a plain function (each refusal names the worker class that fits)."""
    fn = resolve(ref, what="handler", asyncio=asyncio)
    is_b = is_batch_handler(fn)
    if not _accepts(fn, 1):
        sig = inspect.signature(fn)
        kind = "a list of messages" if is_b else "the message"
        raise HandlerLoadError(f"The handler '{ref}' must accept one argument ({kind}); its signature is {sig}")
    if batch_size > 1 and not is_b:
        raise HandlerLoadError(
            f"consumeMessageBatchMaxSize is {batch_size} but the handler '{ref}' takes one message; "
            f"decorate it with @rmqrun.batch to receive lists, or set consumeMessageBatchMaxSize to 1")
    return Handler(ref.strip(), fn, is_b)


def load_hook(ref: str, what: str, *, asyncio: bool = False) -> Callable[..., Any]:
    """Load a ``worker_init`` / ``worker_exit`` hook: a function of no argument or of one (WorkerInfo);
    with ``asyncio`` (the asyncio worker class) it may be ``async def``, awaited on the worker's loop."""
    fn = resolve(ref, what=what, default_attr=what, asyncio=None if asyncio else False)
    if not (_accepts(fn, 0) or _accepts(fn, 1)):
        raise HandlerLoadError(f"The {what} hook '{ref}' must take no argument or one (the worker info); "
                               f"its signature is {inspect.signature(fn)}")
    return fn


def call_hook(fn: Callable[..., Any], info: Any) -> Any:
    """Call a hook with the worker info if it takes an argument, else with none; what it returned (an
    async hook's coroutine, which the asyncio worker class awaits)."""
    if _accepts(fn, 1):
        return fn(info)
    return fn()
