"""``--failed-to PATH``: the messages a backfill's handler failed on, with why, in one file.

Parquet when the path ends in ``.parquet`` (the columns of the ``rocketmq``
source's schema plus ``reason``; ``body`` binary, ``properties`` a map), else
JSON Lines (one object per message; ``body`` as text when it is UTF-8, else
base64, said by ``body_encoding``). Each task writes its own part next to the
path and the driver joins the parts of the successful attempts into it
(:mod:`rmqrun.spark.failure_parts`); this module owns the format of a row.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any, Iterable

from rmqrun.spark.backfill import FailedMessage

COLUMNS = ("topic", "broker", "queue_id", "queue_offset", "msg_id", "tags", "keys", "body", "properties",
           "born_timestamp", "store_timestamp", "reconsume_times", "reason")


def is_parquet(path: str) -> bool:
    return path.lower().endswith(".parquet")


def check_path(path: str) -> str | None:
    """Why ``path`` cannot be written (checked before the job runs), or None."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return f"--failed-to {path!r} is a directory; give a file path (.parquet or .jsonl)"
    if not os.path.isdir(parent):
        return f"--failed-to {path!r}: directory {parent!r} does not exist"
    if not os.access(parent, os.W_OK):
        return f"--failed-to {path!r}: directory {parent!r} is not writable"
    return None


def json_row(f: FailedMessage) -> dict[str, Any]:
    row: dict[str, Any] = {c: getattr(f, c) for c in COLUMNS}
    try:
        row["body"] = f.body.decode("utf-8")
        row["body_encoding"] = "utf-8"
    except UnicodeDecodeError:
        row["body"] = base64.b64encode(f.body).decode("ascii")
        row["body_encoding"] = "base64"
    return row


def write_jsonl(path: str, failures: Iterable[FailedMessage]) -> int:
    n = 0
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        for f in failures:
            out.write(json.dumps(json_row(f), ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, path)
    return n


def parquet_schema():  # type: ignore[no-untyped-def]
    """The Parquet columns of a failure file (pyarrow imported only where one is written)."""
    import pyarrow as pa

    return pa.schema([
        ("topic", pa.string()), ("broker", pa.string()), ("queue_id", pa.int32()), ("queue_offset", pa.int64()),
        ("msg_id", pa.string()), ("tags", pa.string()), ("keys", pa.string()), ("body", pa.binary()),
        ("properties", pa.map_(pa.string(), pa.string())), ("born_timestamp", pa.timestamp("ms")),
        ("store_timestamp", pa.timestamp("ms")), ("reconsume_times", pa.int32()), ("reason", pa.string()),
    ])


def parquet_table(rows: list[FailedMessage], schema: Any):  # type: ignore[no-untyped-def]
    import pyarrow as pa

    columns: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for f in rows:
        for c in COLUMNS:
            value = getattr(f, c)
            columns[c].append(list(value.items()) if c == "properties" else value)
    return pa.table(columns, schema=schema)


def write_parquet(path: str, failures: Iterable[FailedMessage]) -> int:
    import pyarrow.parquet as pq

    rows = list(failures)
    tmp = path + ".tmp"
    pq.write_table(parquet_table(rows, parquet_schema()), tmp)
    os.replace(tmp, path)
    return len(rows)


def write(path: str, failures: Iterable[FailedMessage]) -> int:
    """Write every failure to ``path`` (replacing it); returns how many were written."""
    return write_parquet(path, failures) if is_parquet(path) else write_jsonl(path, failures)
