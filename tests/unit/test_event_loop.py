"""event_loop: auto / uvloop / asyncio, and a clear refusal when uvloop is asked for but missing."""

from __future__ import annotations

import asyncio
import sys

import pytest

from rmqrun import event_loop
from rmqrun.errors import ConfigError


def test_asyncio_is_the_standard_loop_even_with_uvloop_installed() -> None:
    assert event_loop.loop_factory("asyncio") == (None, "asyncio")


def test_auto_falls_back_to_asyncio_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert event_loop.loop_factory("auto") == (None, "asyncio")
    assert event_loop.run(lambda name: _which(name), "auto") == ("asyncio", "_UnixSelectorEventLoop")


def test_uvloop_without_uvloop_is_a_config_error_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)
    with pytest.raises(ConfigError, match=r"event_loop=uvloop but uvloop is not installed"):
        event_loop.loop_factory("uvloop")


def test_an_unknown_choice_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"event_loop='trio' is invalid: one of auto, uvloop, asyncio"):
        event_loop.loop_factory("trio")


@pytest.mark.parametrize("choice", ["auto", "uvloop"])
def test_uvloop_runs_the_coroutine_on_a_uvloop_loop(choice: str) -> None:
    pytest.importorskip("uvloop", reason="the optional rmqrun[uvloop] extra is not installed")
    name, loop_type = event_loop.run(_which, choice)
    assert name.startswith("uvloop") and loop_type == "Loop"


async def _which(name: str) -> tuple[str, str]:
    return name, type(asyncio.get_running_loop()).__name__
