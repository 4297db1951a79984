"""``PullConsumer``: the synchronous pull consumer, for plain scripts and Spark executors.

It runs an :class:`~rmqrun.pull.async_consumer.AsyncPullConsumer` on a private
event loop in a daemon thread and waits for each call, so it works the same
from the main thread, from any other thread (several may call at once; the
loop serialises nothing but the socket writes) and from code that is itself
inside a running event loop (a notebook), where ``asyncio.run`` would refuse.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from types import TracebackType
from typing import Any, Coroutine, TypeVar

from rmqrun.model import Message, MessageQueue
from rmqrun.protocol.subscription import EXPRESSION_TAG
from rmqrun.pull.async_consumer import BLOCK_TIMEOUT, DEFAULT_GROUP, MAX_RECONSUME_TIMES, AsyncPullConsumer
from rmqrun.pull.lookup import END_OF_TIME_MS, UNIQUE_QUERY_MAX, QueryResult
from rmqrun.pull.errors import NotStartedError, WrongCallerError
from rmqrun.pull.result import PullResult
from rmqrun.remoting.security import ClientSecurity

T = TypeVar("T")


class PullConsumer:
    """The blocking twin of :class:`AsyncPullConsumer`: same arguments, same methods.

    Use ``with PullConsumer(...) as c:`` or ``start()`` / ``close()``;
    ``close()`` persists the offsets updated since the last persist.
    """

    def __init__(self, namesrv: str | None = None, group: str = DEFAULT_GROUP, *,
                 timeout: float = 3.0, instance_name: str | None = None, namespace: str | None = None,
                 security: "ClientSecurity | None" = None, register: bool = True) -> None:
        # Arguments are checked here, in the caller's thread, before any thread exists.
        self._async = AsyncPullConsumer(namesrv, group, timeout=timeout, instance_name=instance_name,
                                        namespace=namespace, security=security, register=register)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pid = os.getpid()

    @property
    def namesrv(self) -> str:
        return self._async.namesrv

    @property
    def group(self) -> str:
        return self._async.group

    @property
    def namespace(self) -> str | None:
        return self._async.namespace

    @property
    def timeout(self) -> float:
        return self._async.timeout

    @property
    def client_id(self) -> str | None:
        return self._async.client_id

    def __repr__(self) -> str:
        return repr(self._async).replace("AsyncPullConsumer", "PullConsumer", 1)

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> "PullConsumer":
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(target=self._run_loop, args=(loop, ready), daemon=True,
                                          name=f"rmqrun-pull {self._async.group}")
                thread.start()
                ready.wait()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
        try:
            self._call(self._async.start())
        except BaseException:
            self._stop_loop()
            raise
        return self

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def close(self) -> None:
        """Persist updated offsets, close connections, stop the loop thread (idempotent)."""
        if self._loop is None:
            self._async.mark_closed()  # never started (or already closed): no connection to close
            return
        try:
            self._call(self._async.close())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def __enter__(self) -> "PullConsumer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        future = self._submit(coro)
        try:
            return future.result()
        except BaseException:
            # Ctrl-C (or any interruption) while waiting: stop the request too.
            future.cancel()
            raise

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        loop = self._loop
        if loop is None:
            coro.close()
            raise NotStartedError(f"{self!r} is not started: use it as a context manager or call start() first")
        if self._pid != os.getpid():
            # A forked child (a Spark Python worker) has the loop object but not its thread:
            # waiting on it would hang forever.
            coro.close()
            raise WrongCallerError(f"this PullConsumer was started in process {self._pid} and cannot be used "
                               f"after a fork (in process {os.getpid()}); create one per process")
        if self._thread is threading.current_thread():
            coro.close()
            raise WrongCallerError("PullConsumer methods cannot be called from its own loop thread")
        return asyncio.run_coroutine_threadsafe(coro, loop)

    # ----------------------------------------------------------------- the API

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._call(self._async.fetch_subscribe_message_queues(topic))

    def fetch_topic_list(self) -> list[str]:
        return self._call(self._async.fetch_topic_list())

    def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        return self._call(self._async.fetch_consume_offset(mq, from_store))

    def pull(self, mq: MessageQueue, sub_expression: str | None, offset: int, max_nums: int = 32, *,
             timeout: float | None = None, expression_type: str = EXPRESSION_TAG) -> PullResult:
        return self._call(self._async.pull(mq, sub_expression, offset, max_nums, timeout=timeout,
                                           expression_type=expression_type))

    def pull_undecoded(self, mq: MessageQueue, sub_expression: str | None, offset: int, max_nums: int = 32
                       ) -> tuple[Any, Any]:
        """See :meth:`AsyncPullConsumer.pull_undecoded`: the wire answer and the subscription."""
        return self._call(self._async.pull_undecoded(mq, sub_expression, offset, max_nums))

    def pull_undecoded_later(self, mq: MessageQueue, sub_expression: str | None, offset: int, max_nums: int = 32
                             ) -> concurrent.futures.Future[tuple[Any, Any]]:
        """:meth:`pull_undecoded` sent now, answered through the future: a reader that knows where its
        next pull starts keeps it in flight while it reads the last answer."""
        return self._submit(self._async.pull_undecoded(mq, sub_expression, offset, max_nums))

    def pull_block_if_not_found(self, mq: MessageQueue, sub_expression: str | None, offset: int,
                                max_nums: int = 32, *, timeout: float = BLOCK_TIMEOUT,
                                expression_type: str = EXPRESSION_TAG) -> PullResult:
        return self._call(self._async.pull_block_if_not_found(mq, sub_expression, offset, max_nums,
                                                              timeout=timeout, expression_type=expression_type))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._call(self._async.min_offset(mq))

    def max_offset(self, mq: MessageQueue) -> int:
        return self._call(self._async.max_offset(mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._call(self._async.search_offset(mq, timestamp_ms))

    def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        return self._call(self._async.earliest_msg_store_time(mq))

    def view_message(self, msg_id: str, topic: str | None = None) -> Message:
        return self._call(self._async.view_message(msg_id, topic))

    def query_message(self, topic: str, key: str, max_num: int = UNIQUE_QUERY_MAX, begin_ms: int = 0,
                      end_ms: int = END_OF_TIME_MS) -> QueryResult:
        return self._call(self._async.query_message(topic, key, max_num, begin_ms, end_ms))

    def send_message_back(self, msg: Message, delay_level: int = 0, broker_name: str | None = None,
                          consumer_group: str | None = None, *,
                          max_reconsume_times: int = MAX_RECONSUME_TIMES) -> None:
        self._call(self._async.send_message_back(msg, delay_level, broker_name, consumer_group,
                                                 max_reconsume_times=max_reconsume_times))

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        self._call(self._async.update_consume_offset(mq, offset))

    def persist_consume_offsets(self) -> None:
        self._call(self._async.persist_consume_offsets())

    def updated_offsets(self) -> dict[MessageQueue, int]:
        return dict(self._async.updated_offsets())

    def __getstate__(self) -> Any:
        raise TypeError("a pull consumer holds connections and a thread and cannot be pickled; "
                        "create one per process (e.g. per Spark partition)")
