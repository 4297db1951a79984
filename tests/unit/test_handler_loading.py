"""load_handler / load_hook: the start-up errors a user sees for a bad ``module:function``."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import rmqrun
from rmqrun.errors import ConfigError
from rmqrun.handler.loading import HandlerLoadError, batch, call_hook, load_handler, load_hook, resolve


@pytest.fixture()
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Write throw-away modules to a directory on sys.path; forget them afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(name: str, source: str) -> str:
        path = tmp_path.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(tmp_path).parents:
            if str(parent) != ".":
                (tmp_path / parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(source))
        written.append(name)
        return name

    yield write
    for name in list(sys.modules):
        if any(name == w or name.startswith(w.split(".")[0]) for w in written):
            sys.modules.pop(name, None)


def test_plain_and_batch_handlers_load_with_their_form() -> None:
    plain = load_handler("workers.noop:handle")
    assert plain.ref == "workers.noop:handle" and not plain.is_batch
    assert plain.fn is __import__("workers.noop").noop.handle
    many = load_handler("workers.noop:handle_batch", batch_size=8)
    assert many.is_batch


def test_module_alone_means_its_handle_function() -> None:
    assert load_handler("workers.noop").fn.__name__ == "handle"


def test_dotted_attribute_path(modules) -> None:  # type: ignore[no-untyped-def]
    modules("hmod_obj", """
        class H:
            def on_message(self, msg):
                return None
        handler = H()
    """)
    assert load_handler("hmod_obj:handler.on_message").fn.__name__ == "on_message"


def test_missing_attribute_names_it_and_suggests_close_names() -> None:
    with pytest.raises(HandlerLoadError) as err:
        load_handler("workers.noop:hanlde")
    assert str(err.value) == ("Failed to find attribute 'hanlde' in 'workers.noop' for handler "
                              "'workers.noop:hanlde'; did you mean 'workers.noop:handle'?")


def test_missing_attribute_without_close_match() -> None:
    with pytest.raises(HandlerLoadError, match=r"^Failed to find attribute 'zzz' in 'workers.noop' for handler "
                                               r"'workers.noop:zzz'$"):
        load_handler("workers.noop:zzz")


def test_dot_instead_of_colon_suggests_the_colon_form() -> None:
    with pytest.raises(HandlerLoadError) as err:
        load_handler("workers.noop.handle")
    assert "Module 'workers.noop.handle' not found" in str(err.value)
    assert str(err.value).endswith("did you mean 'workers.noop:handle'?")


def test_file_path_suggests_the_module_form() -> None:
    with pytest.raises(HandlerLoadError, match=r"is a file path, not a module; did you mean 'workers.noop:handle'\?"):
        load_handler("workers/noop.py:handle")


def test_module_not_found() -> None:
    with pytest.raises(HandlerLoadError, match=r"^Module 'no_such_module_xyz' not found for handler "
                                               r"'no_such_module_xyz:handle'$"):
        load_handler("no_such_module_xyz:handle")


def test_import_error_inside_the_module_is_not_reported_as_module_not_found(modules) -> None:  # type: ignore[no-untyped-def]
    modules("hmod_badimport", "import numpy_that_does_not_exist\ndef handle(m): pass\n")
    with pytest.raises(HandlerLoadError) as err:
        load_handler("hmod_badimport:handle")
    text = str(err.value)
    assert text.startswith("Importing module 'hmod_badimport' for handler 'hmod_badimport:handle' failed: "
                           "No module named 'numpy_that_does_not_exist'")
    assert "Traceback" in text


def test_exception_at_import_time_is_reported_with_its_type(modules) -> None:  # type: ignore[no-untyped-def]
    modules("hmod_raises", "raise RuntimeError('config missing')\n")
    with pytest.raises(HandlerLoadError, match=r"failed: RuntimeError: config missing"):
        load_handler("hmod_raises:handle")


def test_syntax_error_is_reported(modules) -> None:  # type: ignore[no-untyped-def]
    modules("hmod_syntax", "def handle(msg:\n")
    with pytest.raises(HandlerLoadError, match=r"Importing module 'hmod_syntax'.*SyntaxError"):
        load_handler("hmod_syntax:handle")


def test_not_callable_class_async_generator_and_arity(modules) -> None:  # type: ignore[no-untyped-def]
    modules("hmod_shapes", """
        value = 3
        class Klass:
            pass
        async def coro(msg):
            pass
        def gen(msg):
            yield msg
        def two(a, b):
            pass
        def plain(msg):
            pass
    """)
    cases = {
        "hmod_shapes:value": "is not callable (its type is int)",
        "hmod_shapes:Klass": "is a class",
        "hmod_shapes:coro": "is an async function",
        "hmod_shapes:gen": "is a generator function",
        "hmod_shapes:two": "must accept one argument (the message); its signature is (a, b)",
    }
    for ref, expected in cases.items():
        with pytest.raises(HandlerLoadError) as err:
            load_handler(ref)
        assert expected in str(err.value), (ref, str(err.value))
    with pytest.raises(HandlerLoadError, match=r"--worker-class asyncio"):
        load_handler("hmod_shapes:coro")
    # the asyncio worker class takes the async def and refuses the plain one, naming the fix
    assert load_handler("hmod_shapes:coro", asyncio=True).fn.__name__ == "coro"
    with pytest.raises(HandlerLoadError, match=r"plain function but worker_class is asyncio.*make it 'async def'"):
        load_handler("hmod_shapes:plain", asyncio=True)
    with pytest.raises(HandlerLoadError, match=r"async function"):
        load_hook("hmod_shapes:coro", "worker_init")
    assert load_hook("hmod_shapes:coro", "worker_init", asyncio=True).__name__ == "coro"
    assert load_hook("hmod_shapes:plain", "worker_init", asyncio=True).__name__ == "plain"
    with pytest.raises(HandlerLoadError, match=r"consumeMessageBatchMaxSize is 4 but the handler "
                                               r"'hmod_shapes:plain' takes one message; decorate it with "
                                               r"@rmqrun.batch"):
        load_handler("hmod_shapes:plain", batch_size=4)


@pytest.mark.parametrize("ref, expected", [
    ("", "reference is empty"),
    ("   ", "reference is empty"),
    (":handle", "has no module before ':'"),
    ("workers.noop:", "has nothing after ':'"),
    ("workers.noop:handle()", "is not an attribute name (expressions and calls are not supported)"),
    ("work-ers:handle", "'work-ers' is not a module name"),
])
def test_malformed_references(ref: str, expected: str) -> None:
    with pytest.raises(HandlerLoadError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        load_handler(ref)


def test_load_errors_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        resolve("no_such_module_xyz:f")


def test_batch_decorator_marks_without_wrapping_and_wraps_what_it_cannot_mark() -> None:
    def f(msgs):  # type: ignore[no-untyped-def]
        return len(msgs)

    assert batch(f) is f and rmqrun.batch is batch

    class C:
        def m(self, msgs):  # type: ignore[no-untyped-def]
            return len(msgs)

    bound = C().m
    wrapped = batch(bound)  # bound methods refuse new attributes
    assert wrapped([1, 2]) == 2 and wrapped.__rmqrun_batch__ is True


def test_hooks_take_zero_or_one_argument(modules) -> None:  # type: ignore[no-untyped-def]
    modules("hmod_hooks", """
        calls = []
        def init0():
            calls.append("init0")
        def init1(info):
            calls.append(("init1", info.worker_id))
        def init2(a, b):
            pass
        def worker_init():
            calls.append("default")
    """)
    info = rmqrun.WorkerInfo(worker_id=3, pid=42)
    call_hook(load_hook("hmod_hooks:init0", "worker_init"), info)
    call_hook(load_hook("hmod_hooks:init1", "worker_init"), info)
    call_hook(load_hook("hmod_hooks", "worker_init"), info)  # module alone: its `worker_init`
    assert sys.modules["hmod_hooks"].calls == ["init0", ("init1", 3), "default"]
    with pytest.raises(HandlerLoadError, match=r"The worker_init hook 'hmod_hooks:init2' must take no argument"):
        load_hook("hmod_hooks:init2", "worker_init")
    with pytest.raises(HandlerLoadError, match=r"Failed to find attribute 'nope' in 'hmod_hooks' for worker_exit"):
        load_hook("hmod_hooks:nope", "worker_exit")
