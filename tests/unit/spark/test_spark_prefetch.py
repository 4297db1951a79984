"""The Spark source's read-ahead (:mod:`rmqrun.spark.prefetch`): same items, same order, same errors as reading
in turn, and a reader that stops early stops the thread."""

from __future__ import annotations

import threading
from typing import Iterator

import pytest

from rmqrun.spark.errors import SourceError
from rmqrun.spark.prefetch import chunks_ahead
from tests.integration.cli_kit import wait_for


def test_chunks_keep_every_item_in_order_and_the_last_chunk_short() -> None:
    chunks = list(chunks_ahead(lambda: iter(range(10)), 4))
    assert chunks == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert list(chunks_ahead(lambda: iter(()), 4)) == []


def test_a_small_first_chunk_doubles_up_to_the_chunk_size_keeping_every_item_in_order() -> None:
    chunks = list(chunks_ahead(lambda: iter(range(40)), 8, first=2))
    assert [len(c) for c in chunks] == [2, 4, 8, 8, 8, 8, 2]
    assert [x for c in chunks for x in c] == list(range(40))
    assert [len(c) for c in chunks_ahead(lambda: iter(range(5)), 4, first=9)] == [4, 1], "never above rows"


def test_an_error_arrives_after_the_chunks_before_it() -> None:
    def items() -> Iterator[int]:
        yield from range(5)
        raise SourceError("offsets 5..9 were deleted")

    got = []
    with pytest.raises(SourceError, match="were deleted"):
        for chunk in chunks_ahead(items, 2):
            got.append(chunk)
    # the partial chunk [4] is lost with the error, as a plain loop would never have yielded it either
    assert got == [[0, 1], [2, 3]]


def test_a_reader_that_stops_early_stops_the_thread() -> None:
    pulled: list[int] = []

    def endless() -> Iterator[int]:
        n = 0
        while True:
            pulled.append(n)
            yield n
            n += 1

    before = {t.ident for t in threading.enumerate()}
    it = chunks_ahead(endless, 3, ahead=1)
    assert next(it) == [0, 1, 2]
    it.close()
    wait_for(lambda: not [t for t in threading.enumerate()
                          if t.name == "rmqrun-spark-prefetch" and t.ident not in before],
             timeout=10, what="the prefetch thread to end")
    # bounded read-ahead: the chunk taken, one queued, one being built when it was told to stop
    assert len(pulled) <= 3 * 3 + 1
