"""Handlers that kill their own worker on chosen messages, for the crash-isolation tests.

Every message not chosen is recorded as ``ok`` in ``PROBE_RECORD`` (the
probe handler's line format, see :mod:`tests.integration.handlers.probe_handler`);
a chosen one (``idx`` in ``PROBE_CRASH_IDX``) is recorded as ``start`` and
then ends its process the way ``PROBE_CRASH`` names:

============  ===================================================================
``exit3``     ``sys.exit(3)`` (the worker's boot-error code, from a ready worker)
``exit7``     ``os._exit(7)``
``segfault``  a NULL read through ctypes (SIGSEGV)
``rlimit``    lowers its own ``RLIMIT_AS`` to what it uses + 32 MiB, then mallocs
              and fills 8 MiB blocks without checking for NULL, as careless C code
              does: the address-space limit ends it (SIGSEGV on the failed block)
============  ===================================================================

``leak_rss`` keeps ``PROBE_LEAK_MB`` MiB per call and records the worker's RSS
after each call as ``rss <pid> <bytes>`` lines in ``PROBE_RSS``.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys

import rmqrun
from tests.integration.handlers.probe_handler import _calls, _selected, _set, _write

CRASH_IDX = _set("PROBE_CRASH_IDX")
CRASH = os.environ.get("PROBE_CRASH", "exit7")
_leaked: list[bytearray] = []


def _hog() -> None:
    with open("/proc/self/statm") as f:
        vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm + (32 << 20), hard))
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    block = 8 << 20
    while True:
        ctypes.memset(libc.malloc(block), 1, block)  # malloc's NULL is not checked


def crash(msg: rmqrun.Message) -> None:
    call = next(_calls)
    if CRASH_IDX is not None and _selected(CRASH_IDX, msg):
        _write("start", [msg], call)
        if CRASH == "exit3":
            sys.exit(3)
        elif CRASH == "exit7":
            os._exit(7)
        elif CRASH == "segfault":
            ctypes.string_at(0)
        elif CRASH == "rlimit":
            _hog()
        raise RuntimeError(f"unknown PROBE_CRASH {CRASH!r}")
    _write("ok", [msg], call)


def leak_rss(msg: rmqrun.Message) -> None:
    chunk = bytearray(int(float(os.environ.get("PROBE_LEAK_MB", "64")) * (1 << 20)))
    chunk[::4096] = b"x" * len(chunk[::4096])  # touch every page so it counts in RSS
    _leaked.append(chunk)
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    fd = os.open(os.environ["PROBE_RSS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"rss {os.getpid()} {rss}\n".encode())
    finally:
        os.close(fd)


@rmqrun.batch
def crash_batch(msgs: list[rmqrun.Message]) -> None:
    """Batch form: a call holding a chosen message ends its process before anything of the call is
    recorded, so each ``ok`` is a call that returned. The death is recorded (``start``) only when the
    chosen message leads the call: messages before it in the same call were still running, and an
    order audit must not read the record as the chosen one overtaking them."""
    call = next(_calls)
    if any(CRASH_IDX is not None and _selected(CRASH_IDX, m) for m in msgs):
        if _selected(CRASH_IDX, msgs[0]):  # type: ignore[arg-type]
            _write("start", msgs[:1], call)
        os._exit(7)
    _write("ok", msgs, call)
