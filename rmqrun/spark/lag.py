"""How far a streaming query is behind the brokers, under the Kafka source's metric names.

Spark's Kafka source puts ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``
and ``avgOffsetsBehindLatest`` in ``sources[i].metrics`` of every progress. A
Python data source cannot: PySpark 4.3's streaming reader has
``reportLatestOffset`` but no metrics hook (the JVM side of a Python source
does not implement ``ReportsSourceMetrics``), so its ``metrics`` stay ``{}``.
What it can do, the ``rocketmq`` source does: every progress carries the
source's ``endOffset`` (what the batch read up to) and ``latestOffset`` (the
brokers' max offsets when the batch was planned), both in the source's offset
form. :func:`offsets_behind` derives the three metrics from them, per queue
``latest - end``, exactly as Kafka's are, for a dashboard, an alert, or a
Prometheus gauge; :func:`listen` keeps them up to date for every query of a
session from a ``StreamingQueryListener`` on the driver.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping

MIN, MAX, AVG = "minOffsetsBehindLatest", "maxOffsetsBehindLatest", "avgOffsetsBehindLatest"


def _offsets(value: Any) -> dict[tuple[str, str], int] | None:
    """``{"topic": {"broker:queue": offset}}`` (a dict or its JSON text) flattened, or None."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, Mapping):
        return None
    out: dict[tuple[str, str], int] = {}
    for topic, queues in value.items():
        if not isinstance(queues, Mapping):
            return None
        for key, offset in queues.items():
            if not isinstance(offset, int):
                return None
            out[(str(topic), str(key))] = offset
    return out


def source_offsets_behind(source: Mapping[str, Any]) -> dict[str, str] | None:
    """The three metrics of one ``sources[i]`` entry of a progress (strings, as Spark's Kafka source
    reports them), or None when it has no offsets of this form (another source, or no batch yet)."""
    end = _offsets(source.get("endOffset"))
    latest = _offsets(source.get("latestOffset"))
    if end is None or latest is None or not latest:
        return None
    behind = [max(0, off - end.get(queue, 0)) for queue, off in latest.items()]
    return {MIN: str(min(behind)), MAX: str(max(behind)), AVG: str(round(sum(behind) / len(behind), 1))}


def offsets_behind(progress: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The metrics of the first ``rocketmq`` source of ``query.lastProgress`` (None before any progress)."""
    if not progress:
        return None
    for source in progress.get("sources") or []:
        found = source_offsets_behind(source)
        if found is not None:
            return found
    return None


def listen(spark: Any, on_progress: Callable[[str, dict[str, str]], None] | None = None) -> dict[str, dict[str, str]]:
    """Follow every streaming query of ``spark``: returns a dict kept up to date, query id -> metrics,
    and calls ``on_progress(query_id, metrics)`` on each progress (e.g. to set Prometheus gauges)."""
    from pyspark.sql.streaming import StreamingQueryListener

    latest: dict[str, dict[str, str]] = {}

    class _OffsetsBehind(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            found = offsets_behind(json.loads(event.progress.json))
            if found is not None:
                latest[str(event.progress.id)] = found
                if on_progress is not None:
                    on_progress(str(event.progress.id), found)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    spark.streams.addListener(_OffsetsBehind())
    return latest
