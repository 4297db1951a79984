"""``--failed-to`` under task retries: each task attempt writes its own part, the driver commits the winners.

Failed messages never travel through the driver: a backfill where most
messages fail would otherwise hit ``spark.driver.maxResultSize`` (or the
driver's memory) with their bodies. Instead, as Hadoop's output committers do:

* the driver makes a staging directory next to ``--failed-to``
  (``.<name>.parts-<run id>``; the path must be on a filesystem the driver and
  the executors share, which it is on a local master);
* each task attempt streams its failures to a part of its own there, named
  after the partition plus a random suffix, as ``<part>.inprogress`` renamed to
  ``<part>`` once complete, and reports only the part's name and row count;
* after the job succeeded, the driver joins, in partition order, exactly the
  parts named by the one result per partition Spark returned. Parts of
  attempts that died, failed, or lost a speculative race are never named, so
  the final file holds every failure once, however often tasks were retried;
  then the staging directory is removed. A failed job commits nothing and
  leaves ``--failed-to`` as it was.

Memory stays flat on both sides: a task keeps at most :data:`ROWS_PER_GROUP`
rows, the driver copies one part (one row group) at a time.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from typing import Any, Iterable

from rmqrun.errors import RmqrunError
from rmqrun.spark.backfill import FailedMessage
from rmqrun.spark.failures import is_parquet, json_row, parquet_schema, parquet_table

#: rows a task buffers before it writes them to its part (one Parquet row group)
ROWS_PER_GROUP = 1000
INPROGRESS = ".inprogress"


class PartsMissingError(RmqrunError):
    """A part a successful task reported is not where the driver looks (no shared filesystem)."""


def staging_dir(path: str) -> str:
    """A new, empty staging directory beside ``path`` (absolute, so executors find it from any cwd)."""
    path = os.path.abspath(path)
    where = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.parts-{uuid.uuid4().hex[:12]}")
    os.makedirs(where)
    return where


def discard(staging: str) -> None:
    shutil.rmtree(staging, ignore_errors=True)


class PartWriter:
    """One task attempt's failures, streamed to ``staging/part-<partition>-<random>.(jsonl|parquet)``."""

    def __init__(self, staging: str, partition: int, parquet: bool) -> None:
        os.makedirs(staging, exist_ok=True)
        self.name = f"part-{partition:05d}-{uuid.uuid4().hex[:8]}.{'parquet' if parquet else 'jsonl'}"
        self.final = os.path.join(staging, self.name)
        self.tmp = self.final + INPROGRESS
        self.parquet = parquet
        self.rows = 0
        self._buffer: list[FailedMessage] = []
        self._out: Any = None

    def add(self, f: FailedMessage) -> None:
        self._buffer.append(f)
        self.rows += 1
        if len(self._buffer) >= ROWS_PER_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self.parquet:
            import pyarrow.parquet as pq

            schema = parquet_schema()
            if self._out is None:
                self._out = pq.ParquetWriter(self.tmp, schema)
            if self._buffer:
                self._out.write_table(parquet_table(self._buffer, schema))
        else:
            if self._out is None:
                self._out = open(self.tmp, "w", encoding="utf-8")
            self._out.writelines(json.dumps(json_row(f), ensure_ascii=False) + "\n" for f in self._buffer)
        self._buffer = []

    def close(self) -> str | None:
        """Finish the part; its name (None when there was nothing to write)."""
        if not self.rows:
            return None
        self._flush()
        self._out.close()
        self._out = None
        os.replace(self.tmp, self.final)
        return self.name

    def abort(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
        try:
            os.unlink(self.tmp)
        except OSError:
            pass


def commit(path: str, staging: str, parts: Iterable[str]) -> None:
    """Join ``parts`` (in the given order) into ``path``, replacing it; then drop the staging directory."""
    names = list(parts)
    missing = [n for n in names if not os.path.exists(os.path.join(staging, n))]
    if missing:
        raise PartsMissingError(
            f"--failed-to {path}: the executors wrote {len(missing)} part(s) of failed messages to {staging}, "
            f"which this machine does not see (e.g. {missing[0]}); put --failed-to on a filesystem the driver "
            f"and the executors share")
    tmp = os.path.abspath(path) + ".tmp"
    if is_parquet(path):
        _join_parquet(tmp, [os.path.join(staging, n) for n in names])
    else:
        with open(tmp, "wb") as out:
            for n in names:
                with open(os.path.join(staging, n), "rb") as part:
                    shutil.copyfileobj(part, out)
    os.replace(tmp, path)
    discard(staging)


def _join_parquet(tmp: str, parts: list[str]) -> None:
    import pyarrow.parquet as pq

    schema = parquet_schema()
    with pq.ParquetWriter(tmp, schema) as out:
        for part in parts:
            source = pq.ParquetFile(part)
            for group in range(source.num_row_groups):
                out.write_table(source.read_row_group(group))
