"""Run the embedded name server and broker: in this process, in a thread, or as a child process.

Three ways, one object model:

* ``async with EmbeddedBroker(data_dir) as eb:`` (or ``await eb.start()`` /
  ``await eb.stop()``) runs both servers on the running asyncio loop;
* ``with EmbeddedBroker(data_dir) as eb:`` runs them on a private loop in a
  daemon thread, for synchronous code (tests, the supervisor's main job);
* ``with BrokerProcess(data_dir) as bp:`` runs ``python -m rmqrun.broker`` as
  a child process, which is what crash tests need (``bp.kill()`` is a real
  SIGKILL). The child prints one ``RMQRUN_BROKER_READY`` line once both
  servers listen; the parent waits for it, so there is no polling and no race.

Each way runs on the event loop it is given a choice of (:mod:`rmqrun.event_loop`: ``auto``, the
default, is uvloop when installed): :func:`run` (``rmqrun broker --event-loop``) and
``start_in_thread`` with ``event_loop``, the child process with ``BrokerProcess(event_loop=...)``;
``async with`` runs on the loop that is running.

Ports default to 0 (the OS picks free ones) everywhere except :func:`run`,
the CLI's entry point, which defaults to RocketMQ's 9876 / 10911. The chosen
addresses are :attr:`namesrv_address` and :attr:`broker_address`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from loguru import logger

from rmqrun.aio import stop_on_signals
from rmqrun.broker.broker import Broker
from rmqrun.broker.config import BROKER_SETTINGS, BrokerConfig, with_settings
from rmqrun.broker.kv_config import KVConfigTable
from rmqrun.broker.namesrv import BrokerEntry, NameServer
from rmqrun.broker.store.errors import StoreError
from rmqrun.broker.tls import tls_server_options
from rmqrun.errors import RmqrunError
from rmqrun.event_loop import loop_factory
from rmqrun.event_loop import run as run_on_loop

READY_MARKER = "RMQRUN_BROKER_READY"

_CONFIG_FIELDS = set(BROKER_SETTINGS)


def make_config(data_dir: str | os.PathLike[str], *, host: str = "127.0.0.1", namesrv_port: int = 0,
                broker_port: int = 0, **settings: Any) -> BrokerConfig:
    """A :class:`BrokerConfig` of broker settings by name (the store's among them, see
    :data:`~rmqrun.broker.config.BROKER_SETTINGS`); unknown names are refused with the valid ones listed."""
    unknown = sorted(set(settings) - _CONFIG_FIELDS)
    if unknown:
        raise ValueError(f"unknown broker setting(s) {unknown}; valid: {sorted(_CONFIG_FIELDS - {'data_dir'})}")
    settings.setdefault("namesrv_host", host)
    return BrokerConfig(data_dir=Path(data_dir), host=host, port=broker_port, namesrv_port=namesrv_port,
                        **with_settings(None, **settings))


class EmbeddedBrokerError(RmqrunError, RuntimeError):
    """The embedded broker cannot be started as asked: already running, or its process never became ready.

    A ``RuntimeError`` too, as it was before it had a class of its own.
    """


class EmbeddedBroker:
    """A name server and a broker sharing one data directory and one event loop.

    ``event_loop`` is the loop ``start_in_thread`` makes (auto: uvloop when installed, as ``rmqrun broker``),
    so what runs the broker in tests is what runs it in production; it is checked here, before anything starts.
    """

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, host: str = "127.0.0.1",
                 namesrv_port: int = 0, broker_port: int = 0, config: BrokerConfig | None = None,
                 event_loop: str = "auto", **settings: Any) -> None:
        if config is None:
            if data_dir is None:
                raise ValueError("EmbeddedBroker needs a data_dir (or a config)")
            config = make_config(data_dir, host=host, namesrv_port=namesrv_port, broker_port=broker_port,
                                 **settings)
        self.config = config
        self._loop_factory, _ = loop_factory(event_loop)  # start_in_thread's; None: asyncio's own
        tls = tls_server_options(config.tls_cert, config.tls_key, config.tls_mode)
        self.namesrv = NameServer(config.namesrv_host, config.namesrv_port, **tls)
        self.broker = Broker(config)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        # The name server's KV table (ORDER_TOPIC_CONFIG) lives beside the broker's data.
        self.namesrv.kv = KVConfigTable(config.data_dir / "namesrv" / "kvConfig.json")
        self.namesrv.order_message_enable = config.order_message_enable

    @property
    def namesrv_address(self) -> str:
        """The name server's ``host:port`` to give clients (a wildcard host is told as the store host)."""
        host = self.config.namesrv_host
        if host in ("0.0.0.0", "::", ""):
            host = self.config.store_host
        return f"{host}:{self.namesrv.server.port}"

    @property
    def broker_address(self) -> str:
        return self.broker.address

    @staticmethod
    def subprocess(data_dir: str | os.PathLike[str], **kwargs: Any) -> "BrokerProcess":
        """The same broker as a child process (``with EmbeddedBroker.subprocess(d) as bp:``)."""
        return BrokerProcess(data_dir, **kwargs)

    # ------------------------------------------------------------------ on the running loop

    async def start(self) -> None:
        await self.broker.start()
        assert self.broker.topics is not None
        broker = self.broker
        self.namesrv.attach(BrokerEntry(self.config.cluster_name, self.config.broker_name, broker.address,
                                        broker.topics, permission=lambda: broker.config.broker_permission))
        try:
            await self.namesrv.start()
        except BaseException:
            await self.broker.stop()
            raise
        self.broker.namesrv_address = self.namesrv_address  # for getBrokerConfig's namesrvAddr

    async def stop(self) -> None:
        await self.namesrv.stop()
        await self.broker.stop()

    async def __aenter__(self) -> "EmbeddedBroker":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ on a private thread

    def start_in_thread(self, timeout: float = 60.0) -> "EmbeddedBroker":
        """Start on a private event loop in a daemon thread; returns once both servers listen."""
        if self._thread is not None:
            raise EmbeddedBrokerError("already running in a thread")
        started = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            loop = (self._loop_factory or asyncio.new_event_loop)()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._thread_main(started, failure))
            finally:
                loop.close()

        self._thread = threading.Thread(target=main, name="rmqrun-embedded-broker", daemon=True)
        self._thread.start()
        if not started.wait(timeout):
            raise TimeoutError(f"embedded broker did not start within {timeout}s")
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    async def _thread_main(self, started: threading.Event, failure: list[BaseException]) -> None:
        self._stop_event = asyncio.Event()
        try:
            await self.start()
        except BaseException as exc:
            failure.append(exc)
            started.set()
            return
        started.set()
        await self._stop_event.wait()
        await self.stop()

    def stop_in_thread(self, timeout: float = 60.0) -> None:
        if self._thread is None or self._loop is None or self._stop_event is None:
            return
        self._loop.call_soon_threadsafe(self._stop_event.set)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"embedded broker did not stop within {timeout}s")
        self._thread = None

    def __enter__(self) -> "EmbeddedBroker":
        return self.start_in_thread()

    def __exit__(self, *exc: object) -> None:
        self.stop_in_thread()


# --------------------------------------------------------------------------- child process

class BrokerProcess:
    """``python -m rmqrun.broker`` as a child process, started on free ports by default."""

    def __init__(self, data_dir: str | os.PathLike[str], *, host: str = "127.0.0.1", namesrv_port: int = 0,
                 broker_port: int = 0, python: str | None = None, log_path: str | os.PathLike[str] | None = None,
                 cwd: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None,
                 event_loop: str = "auto", **settings: Any) -> None:
        """``cwd`` and ``env`` are the child's (default: this process's): with ``python -m`` its cwd and
        PYTHONPATH decide which ``rmqrun`` it imports. ``event_loop`` other than ``auto`` is passed as
        ``--event-loop`` (a tree from before that flag runs on auto's choice and is left without it)."""
        make_config(data_dir, host=host, namesrv_port=namesrv_port, broker_port=broker_port, **settings)  # validate
        self.data_dir = Path(data_dir)
        self.argv = [python or sys.executable, "-m", "rmqrun.broker", "--data-dir", str(self.data_dir),
                     "--host", host, "--namesrv-port", str(namesrv_port), "--broker-port", str(broker_port),
                     "--settings-json", json.dumps(settings), "--parent-pid", str(os.getpid())]
        if event_loop != "auto":
            self.argv += ["--event-loop", event_loop]
        self.log_path = Path(log_path) if log_path else self.data_dir.with_name(self.data_dir.name + ".broker.log")
        self.cwd, self.env = cwd, env
        self.proc: subprocess.Popen[str] | None = None
        self.namesrv_address = ""
        self.broker_address = ""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 60.0) -> "BrokerProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "a", encoding="utf-8")
        try:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=log, text=True,
                                         start_new_session=True, cwd=self.cwd, env=self.env)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        ready = threading.Event()
        lines: list[str] = []

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                lines.append(line)
                if line.startswith(READY_MARKER):
                    ready.set()
            ready.set()  # EOF: the child died

        threading.Thread(target=read, name="broker-process-stdout", daemon=True).start()
        ready.wait(max(0.0, deadline - time.monotonic()))
        marker = next((ln for ln in lines if ln.startswith(READY_MARKER)), None)
        if marker is None:
            self.kill()
            tail = self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]
            raise EmbeddedBrokerError(f"broker process did not become ready within {timeout}s; log tail:\n{tail}")
        info = dict(part.split("=", 1) for part in marker.split()[1:])
        self.namesrv_address, self.broker_address = info["namesrv"], info["broker"]
        return self

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (a clean shutdown that flushes everything), then wait; SIGKILL if it hangs."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: the crash the durability tests need."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------------- CLI entry point

def run(data_dir: str | os.PathLike[str], host: str = "127.0.0.1", namesrv_port: int = 9876,
        broker_port: int = 10911, *, ready_line: bool = True, event_loop: str = "auto", **settings: Any) -> int:
    """Serve until SIGINT or SIGTERM, then shut down cleanly; returns the exit code.

    It runs on the ``event_loop`` chosen (:mod:`rmqrun.event_loop`: a ConfigError for a choice it cannot
    make, before anything starts) and its start line says which.

    With ``ready_line`` it prints ``RMQRUN_BROKER_READY namesrv=<addr> broker=<addr>
    pid=<pid>`` on stdout once both servers listen (what :class:`BrokerProcess` waits
    for). Without it (``rmqrun broker --log-format json``) stdout carries nothing: the
    same addresses are in the "name server on ..." log record (its ``extra`` holds
    ``namesrv``, ``broker`` and ``pid``), so a JSON log stream stays one JSON object a line.

    A stop that cannot save everything (a full disk: the checkpoint, offsets) logs one
    error line saying what was not saved and returns 1; it is not a start failure.
    """
    config = make_config(data_dir, host=host, namesrv_port=namesrv_port, broker_port=broker_port, **settings)
    return run_on_loop(lambda loop_name: _serve(config, ready_line, loop_name), event_loop)


async def _serve(config: BrokerConfig, ready_line: bool = True, loop_name: str = "asyncio") -> int:
    eb = EmbeddedBroker(config=config)
    with stop_on_signals() as stop:  # held through the stop too: a second signal does not cut it short
        await eb.start()
        if ready_line:
            print(f"{READY_MARKER} namesrv={eb.namesrv_address} broker={eb.broker_address} pid={os.getpid()}",
                  flush=True)
        logger.bind(namesrv=eb.namesrv_address, broker=eb.broker_address, pid=os.getpid(), event_loop=loop_name).info(
            "name server on {}, broker on {}, event loop: {}; SIGINT or SIGTERM stops", eb.namesrv_address,
            eb.broker_address, loop_name)
        await stop.wait()
        logger.info("stopping")
        try:
            await eb.stop()
        except (OSError, StoreError) as exc:
            logger.error("the broker stopped, but not cleanly: {}", exc)
            return 1
    return 0
