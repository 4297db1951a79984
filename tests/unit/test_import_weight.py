"""Importing the wire schema loads the wire schema, not the process machinery above it.

``rmqrun.protocol`` sits below both the client and the embedded broker (issue #21); a Spark executor, a
broker-only process or a script decoding a captured frame should not pay for (or depend on) the worker, the
supervisor, the push consumer or the command line. Each check runs in a fresh interpreter, since this test
process has long imported everything.

``rmqrun/__init__`` imports the handler contract from ``rmqrun.worker`` today (which loads ``rmqrun.pipe.wire``),
so the ``worker`` and ``pipe`` cases fail until the handler contract moves out of ``worker/`` (issue #21's part 3,
in a parallel branch); nothing is skipped.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Every module of the protocol package (importing the package alone imports nothing else of it).
PROTOCOL_MODULES = ("rmqrun.protocol", "rmqrun.protocol.header_codec", "rmqrun.protocol.headers",
                    "rmqrun.protocol.bodies", "rmqrun.protocol.subscription", "rmqrun.protocol.java_order")

#: Parts that must not be loaded by the wire schema (``pipe`` is not above it, but beside it: no reason to load).
ABOVE = ("worker", "supervisor", "consumer", "admin", "cli", "client", "broker", "pull", "spark", "pipe")


def loaded_by(*modules: str) -> list[str]:
    """The ``rmqrun`` modules a fresh interpreter has loaded after importing ``modules``."""
    code = ("import importlib, json, sys\n"
            f"for m in {list(modules)!r}:\n    importlib.import_module(m)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m == 'rmqrun' or m.startswith('rmqrun.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def protocol_loads() -> list[str]:
    return loaded_by(*PROTOCOL_MODULES)


@pytest.mark.parametrize("part", ABOVE)
def test_importing_the_protocol_loads_nothing_above_it(protocol_loads: list[str], part: str) -> None:
    prefix = f"rmqrun.{part}"
    dragged = [m for m in protocol_loads if m == prefix or m.startswith(prefix + ".")]
    assert not dragged, f"import rmqrun.protocol.* loads {dragged}"


def test_the_check_sees_what_an_import_drags_in() -> None:
    # so the test above cannot pass on an empty answer: the client instance does load the protocol and the client
    loaded = loaded_by("rmqrun.client.instance")
    assert "rmqrun.protocol.headers" in loaded and "rmqrun.client.instance" in loaded
