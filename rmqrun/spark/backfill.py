"""What one ``rmqrun spark`` run is asked to do, and what each Spark partition reports back.

Plain, picklable data only: :class:`TaskConfig` travels from the driver to every
executor inside the partition function's closure, :class:`RangeReport` travels
back with ``collect()`` and holds counts only (failed messages go where they
belong from the executor: :mod:`rmqrun.spark.send_back`). Nothing here imports pyspark, so the CLI can check
options, and tests can build reports, without a JVM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmqrun.remoting.security import ClientSecurity

#: the group whose name the executors' pull consumers carry when --group is not given (pulls never commit)
PULL_GROUP = "rmqrun_spark"
#: Java's default maxReconsumeTimes: a message republished with this count goes to %DLQ%<group>
MAX_RECONSUME_TIMES = 16

# Per-message result names in the summary's counts.
SUCCESS = "success"
RECONSUME_LATER = "ReconsumeLater"
NOT_ACKED = "AckIndex: not acked"
#: a handler returned False ("not done"): retried as ReconsumeLater() is
RETURNED_FALSE = "returned False"
TIME_LIMIT = "time limit"
BAD_RESULT = "bad result"


@dataclass(frozen=True, slots=True)
class Bound:
    """``--from`` / ``--to`` as given: ``kind`` earliest | latest | offset | time | json.

    ``value`` is the offset or epoch milliseconds; ``spec`` holds the parsed
    JSON map (an :class:`rmqrun.spark.offsets.OffsetSpec`) for ``json``.
    """

    kind: str
    value: int = 0
    spec: Any = None

    def describe(self) -> str:
        if self.kind in ("offset", "time"):
            return f"{self.kind} {self.value}"
        return self.kind


@dataclass(frozen=True, slots=True)
class TaskConfig:
    """Everything an executor needs to handle one range (sent once per partition)."""

    namesrv: str
    handler: str
    tags: str = "*"
    worker_init: str | None = None
    batch_size: int = 1
    time_limit: float = 900.0
    #: consumer group: names the pulls and, when ``send_back``, the %RETRY% topic failures go to
    group: str = PULL_GROUP
    #: failed messages: "retry" = republish to %RETRY%<group> from the executor; "parts" = write them to
    #: the attempt's own part under ``failed_parts`` (for --failed-to); "count" = only count them
    failures: str = "count"
    #: the staging directory of --failed-to's parts, and whether they are Parquet (else JSON Lines)
    failed_parts: str | None = None
    failed_parquet: bool = False
    timeout: float = 10.0
    #: topics and the group are wrapped in this namespace on the wire (and failures republished under it)
    namespace: str | None = None
    #: ACL credentials / TLS of every connection the executor opens (None: neither); never in repr
    security: "ClientSecurity | None" = field(default=None, repr=False)


@dataclass(slots=True)
class FailedMessage:
    """A message the handler did not succeed on, with why (one row of ``--failed-to``)."""

    topic: str
    broker: str
    queue_id: int
    queue_offset: int
    msg_id: str
    tags: str | None
    keys: str | None
    body: bytes
    properties: dict[str, str]
    born_timestamp: int
    store_timestamp: int
    reconsume_times: int
    reason: str
    #: the delay level the handler asked for (ReconsumeLater / AckIndex); -1 = straight to the DLQ
    delay_level: int = 0

    @classmethod
    def of(cls, msg: Any, reason: str, delay_level: int = 0) -> "FailedMessage":
        return cls(msg.topic, msg.broker_name, msg.queue_id, msg.queue_offset, msg.msg_id, msg.tags, msg.keys,
                   bytes(msg.body), dict(msg.properties), msg.born_timestamp, msg.store_timestamp,
                   msg.reconsume_times, reason, delay_level)


@dataclass(slots=True)
class RangeReport:
    """What one partition did: counts per result, where its failures went, time spent (no message)."""

    partition: int
    topic: str
    broker: str
    queue_id: int
    start: int
    end: int
    handled: int = 0
    succeeded: int = 0
    failed: int = 0
    sent_to_retry: int = 0
    results: dict[str, int] = field(default_factory=dict)
    #: the failures of the handler call just made; the task hands them to its failure sink after each
    #: call, so this is empty when the report leaves the executor
    failures: list[FailedMessage] = field(default_factory=list)
    #: the --failed-to part this attempt wrote (a name in the staging directory) and its rows
    part: str | None = None
    written: int = 0
    #: the first few failure reasons, for the summary even when messages are not collected
    sample_reasons: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, result: str, n: int = 1) -> None:
        self.results[result] = self.results.get(result, 0) + n
