"""Pull the next messages of a range while the task turns the previous ones into Arrow batches.

A partition alternates between waiting for a pull (the broker reads, the
client's loop thread decodes) and building an Arrow batch that Spark then
copies out of the Python worker; done in turn, each waits for the other. Here a
thread drains :func:`~rmqrun.spark.pulling.read_range` into chunks of
``rows`` messages, at most ``ahead`` chunks in front of the reader, so both
overlap. Order, the range's bounds and every error of ``read_range`` (data
loss with ``failOnDataLoss``, a broker that does not answer) reach the caller
exactly as without the thread: an error is raised where its chunk would have
been. A caller that stops early (a ``LIMIT``) stops the thread at its next chunk.

The first chunk can be smaller (``first``), each next one twice the last up to
``rows``: the JVM gets its first rows after a few pulls instead of a full chunk's,
and starts taking them in while the rest of the range is pulled.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterator

_END = object()


def _chunked(items: Iterator[Any], rows: int, first: int | None) -> Iterator[list[Any]]:
    size = max(1, min(first or rows, rows))
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
            size = min(size * 2, rows)
    if chunk:
        yield chunk


def chunks_ahead(messages: Callable[[], Iterator[Any]], rows: int, ahead: int = 2,
                 first: int | None = None) -> Iterator[list[Any]]:
    """Chunks of at most ``rows`` items of ``messages()`` (the first of ``first``, then doubling up to
    ``rows``), produced by a thread up to ``ahead`` chunks early."""
    return items_ahead(lambda: _chunked(messages(), rows, first), ahead)


def items_ahead(produce: Callable[[], Iterator[Any]], ahead: int = 2) -> Iterator[Any]:
    """The items of ``produce()``, made by a thread up to ``ahead`` items before the caller takes them
    (the Spark source's Arrow batches are built there, while the caller hands the last one to Spark)."""
    out: queue.Queue[Any] = queue.Queue(maxsize=max(1, ahead))
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def fill() -> None:
        try:
            for item in produce():
                if not put(item):
                    return
            put(_END)
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, raised there
            put(exc)

    thread = threading.Thread(target=fill, name="rmqrun-spark-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = out.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
