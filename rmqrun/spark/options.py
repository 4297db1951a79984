"""The ``rocketmq`` source's and sink's options: names, parsing, validation.

Names follow Spark's Kafka connector where the meaning is the same
(``startingOffsets``, ``endingOffsets``, ``maxOffsetsPerTrigger``,
``failOnDataLoss``, ``minPartitions``, ``maxRecordsPerPartition``), so Spark
users already know them. Spark hands options over case-insensitively and
``dict(options)`` lower-cases the keys, so every lookup here goes through the
lower-cased name; errors name the option as the user spelled it in the docs.

Every error is an :class:`OptionError` (a ``ValueError``) whose text starts with
``rocketmq source option <name>``, raised while Spark plans the query, so the
user sees it in the Analysis/Py4J exception instead of a failure deep in a task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from rmqrun.namespace import check_namespace
from rmqrun.remoting.security import ClientSecurity
from rmqrun.spark.errors import OptionError
from rmqrun.spark.offsets import (EARLIEST, LATEST, OffsetSpec, check_batch_sentinels, parse_offset_spec,
                                  parse_timestamp_map)

# Options Spark itself may add to a source's or sink's options.
_SPARK_INTERNAL = {"path", "paths", "checkpointlocation", "__checkpointlocation"}

#: ACL credentials and TLS, as the settings access_key, secret_key, ... of rmqrun run (secretKeyFile is read
#: where the query is planned; the secret then travels to the executors inside the pickled options)
SECURITY_OPTIONS = ("accessKey", "secretKey", "secretKeyFile", "securityToken", "tls", "tlsCaFile", "tlsCertFile",
                    "tlsKeyFile", "tlsInsecure")
READ_OPTIONS = ("namesrv", "topic", "subscribePattern", "tags", "startingOffsets", "endingOffsets",
                "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
                "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "group",
                "failOnDataLoss", "minPartitions", "maxRecordsPerPartition", "pullTimeoutMs", "pullBatchSize",
                "namespace", *SECURITY_OPTIONS)
WRITE_OPTIONS = ("namesrv", "topic", "createTopic", "producerGroup", "sendTimeoutMs", "namespace", *SECURITY_OPTIONS)

#: maxTriggerDelay when minOffsetsPerTrigger is set and it is not (the Kafka source's default, 15m)
DEFAULT_MAX_TRIGGER_DELAY = 15 * 60.0
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def _check_known(opts: dict[str, str], known: tuple[str, ...], what: str) -> None:
    names = {k.lower() for k in known}
    unknown = sorted(k for k in opts if k not in names and k not in _SPARK_INTERNAL)
    if unknown:
        raise OptionError(f"rocketmq {what}: unknown option(s) {', '.join(unknown)}; "
                          f"known options: {', '.join(known)}")


def _required(opts: dict[str, str], name: str, what: str) -> str:
    value = opts.get(name.lower(), "").strip()
    if not value:
        raise OptionError(f"rocketmq {what} option {name} is required")
    return value


def _int(opts: dict[str, str], name: str, default: int | None, *, minimum: int, what: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"rocketmq {what} option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"rocketmq {what} option {name} must be >= {minimum}, got {value}")
    return value


def _bool(opts: dict[str, str], name: str, default: bool, what: str) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    v = raw.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(f"rocketmq {what} option {name} must be true or false, got {raw!r}")


def _namespace(opts: dict[str, str], what: str) -> str | None:
    """Option ``namespace``: topics and groups are ``namespace%name`` on the wire; rows show plain names."""
    raw = opts.get("namespace")
    try:
        return check_namespace(raw)
    except ValueError as exc:
        raise OptionError(f"rocketmq {what} option namespace {raw!r} is invalid: {exc}") from None


def _topics(opts: dict[str, str], what: str) -> tuple[str, ...]:
    raw = _required(opts, "topic", what)
    topics = tuple(t.strip() for t in raw.split(",") if t.strip())
    if not topics:
        raise OptionError(f"rocketmq {what} option topic names no topic: {raw!r}")
    if len(set(topics)) != len(topics):
        raise OptionError(f"rocketmq {what} option topic lists a topic twice: {raw!r}")
    return topics


def _subscription(opts: dict[str, str], what: str) -> tuple[tuple[str, ...], str | None]:
    """(topics, None) from option topic or ((), pattern) from option subscribePattern: exactly one of them."""
    pattern = opts.get("subscribepattern")
    if pattern is not None and "topic" in opts:
        raise OptionError(f"rocketmq {what}: give option topic or subscribePattern, not both")
    if pattern is None:
        if "topic" not in opts:
            raise OptionError(f"rocketmq {what}: one of the options topic or subscribePattern is required")
        return _topics(opts, what), None
    if not pattern.strip():
        raise OptionError(f"rocketmq {what} option subscribePattern is empty")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise OptionError(f"rocketmq {what} option subscribePattern is not a valid regular expression "
                          f"({exc}): {pattern!r}") from None
    return (), pattern


def _duration(opts: dict[str, str], name: str, default: float, what: str) -> float:
    """Seconds from ``"15m"``, ``"30s"``, ``"500ms"``, ``"1h"``, ``"2d"`` (a bare number is milliseconds,
    as in Spark's own time options)."""
    raw = opts.get(name.lower())
    if raw is None:
        return default
    found = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", raw.lower())
    unit = found.group(2) or "ms" if found else None
    if found is None or unit not in _DURATION_UNITS:
        raise OptionError(f"rocketmq {what} option {name} must be a duration like 30s, 15m, 500ms or 1h, "
                          f"got {raw!r}")
    return int(found.group(1)) * _DURATION_UNITS[unit]


def _security(opts: dict[str, str], what: str) -> ClientSecurity | None:
    """ClientSecurity from the security options; None when none is given. Never echoes a secret."""
    def text(name: str) -> str | None:
        return opts.get(name.lower(), "").strip() or None

    secret = text("secretKey")
    path = text("secretKeyFile")
    if path is not None:
        if secret is not None:
            raise OptionError(f"rocketmq {what}: give option secretKey or secretKeyFile, not both")
        try:
            with open(path, encoding="utf-8") as fh:
                secret = (fh.readline() or "").strip() or None
        except (OSError, UnicodeDecodeError) as exc:
            raise OptionError(f"rocketmq {what} option secretKeyFile: cannot read {path}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
        if secret is None:
            raise OptionError(f"rocketmq {what} option secretKeyFile: {path} is empty")
    tls = _bool(opts, "tls", False, what)
    insecure = _bool(opts, "tlsInsecure", False, what)
    access_key = text("accessKey")
    token = text("securityToken")
    if access_key and not secret:
        raise OptionError(f"rocketmq {what} option accessKey is set but neither secretKey nor secretKeyFile is")
    if (secret or token) and not access_key:
        raise OptionError(f"rocketmq {what} option {'secretKey' if secret else 'securityToken'} is set but "
                          "accessKey is not")
    files = {"tlsCaFile": text("tlsCaFile"), "tlsCertFile": text("tlsCertFile"), "tlsKeyFile": text("tlsKeyFile")}
    if not tls and (insecure or any(files.values())):
        given = [k for k, v in files.items() if v] + (["tlsInsecure"] if insecure else [])
        raise OptionError(f"rocketmq {what} option {', '.join(given)} needs option tls=true")
    if files["tlsKeyFile"] and not files["tlsCertFile"]:
        raise OptionError(f"rocketmq {what} option tlsKeyFile needs option tlsCertFile")
    if not (access_key or tls):
        return None
    return ClientSecurity(access_key=access_key, secret_key=secret, security_token=token, tls=tls,
                          tls_ca_file=files["tlsCaFile"], tls_cert_file=files["tlsCertFile"],
                          tls_key_file=files["tlsKeyFile"], tls_insecure=insecure)


def _offsets(opts: dict[str, str], topics: tuple[str, ...] | None, streaming: bool) -> tuple[OffsetSpec, OffsetSpec]:
    """startingOffsets / endingOffsets, each with its ...ByTimestamp map (which wins for the queues it names)."""
    default_start = "latest" if streaming else "earliest"
    starting = parse_offset_spec(opts.get("startingoffsets", default_start), "startingOffsets", topics,
                                 allow_timestamp=True)
    if not streaming:
        check_batch_sentinels(starting, "startingOffsets")
    if starting.kind == "latest" and not streaming and "startingoffsets" in opts:
        raise OptionError("rocketmq source option startingOffsets: 'latest' is not allowed in a batch "
                          "query (it would always read nothing); use earliest, a JSON map or timestamp:<ms>")
    ending = LATEST
    if "endingoffsets" in opts or "endingoffsetsbytimestamp" in opts:
        if streaming:
            name = "endingOffsets" if "endingoffsets" in opts else "endingOffsetsByTimestamp"
            raise OptionError(f"rocketmq source option {name} is for batch queries only; "
                              "a streaming query reads until stopped (see trigger(availableNow=True))")
    if "endingoffsets" in opts:
        ending = parse_offset_spec(opts["endingoffsets"], "endingOffsets", topics, allow_timestamp=False)
        check_batch_sentinels(ending, "endingOffsets")
        if ending.kind == "earliest":
            raise OptionError("rocketmq source option endingOffsets: 'earliest' is not allowed; "
                              "use latest or a JSON map")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("rocketmq source option startingOffsetsByTimestampStrategy must be error or latest, "
                          f"got {opts['startingoffsetsbytimestampstrategy']!r}")
    if "startingoffsetsbytimestamp" in opts:
        starting = parse_timestamp_map(opts["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp", topics,
                                       fallback=starting, strategy=strategy)
    elif "startingoffsetsbytimestampstrategy" in opts:
        raise OptionError("rocketmq source option startingOffsetsByTimestampStrategy needs option "
                          "startingOffsetsByTimestamp")
    if "endingoffsetsbytimestamp" in opts:
        ending = parse_timestamp_map(opts["endingoffsetsbytimestamp"], "endingOffsetsByTimestamp", topics,
                                     fallback=ending, strategy="latest")
    return starting, ending


def _trigger_limits(opts: dict[str, str], streaming: bool, what: str) -> tuple[int | None, int | None, float]:
    """maxOffsetsPerTrigger, minOffsetsPerTrigger, maxTriggerDelay (seconds): streaming only, min <= max."""
    max_rows = _int(opts, "maxOffsetsPerTrigger", None, minimum=1, what=what)
    min_rows = _int(opts, "minOffsetsPerTrigger", None, minimum=1, what=what)
    delay = _duration(opts, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY, what)
    for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
        if name.lower() in opts and not streaming:
            raise OptionError(f"rocketmq source option {name} is for streaming queries only")
    if "maxtriggerdelay" in opts and min_rows is None:
        raise OptionError("rocketmq source option maxTriggerDelay needs option minOffsetsPerTrigger (it bounds "
                          "how long a trigger waits for that many new offsets)")
    if min_rows is not None and max_rows is not None and min_rows > max_rows:
        raise OptionError(f"rocketmq source option minOffsetsPerTrigger ({min_rows}) is larger than "
                          f"maxOffsetsPerTrigger ({max_rows})")
    return max_rows, min_rows, delay


@dataclass(frozen=True)
class ReadOptions:
    """The parsed options of a read (batch or streaming). Picklable: shipped to executors."""

    namesrv: str
    #: the topics of option topic; empty with option subscribePattern
    topics: tuple[str, ...]
    tags: str = "*"
    starting: OffsetSpec = EARLIEST
    ending: OffsetSpec = LATEST
    max_offsets_per_trigger: int | None = None
    group: str | None = None
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    pull_timeout: float = 10.0
    pull_batch_size: int = 32
    #: topics and the group are read under this namespace (``ns%topic`` on the wire); rows show plain topics
    namespace: str | None = None
    #: ACL credentials / TLS (options accessKey, secretKey or secretKeyFile, tls, ...); never in repr
    security: ClientSecurity | None = field(default=None, repr=False)
    #: option subscribePattern: a regular expression the whole topic name must match (re.fullmatch)
    pattern: str | None = None
    #: option minOffsetsPerTrigger: a trigger with fewer new offsets waits (up to max_trigger_delay seconds)
    min_offsets_per_trigger: int | None = None
    max_trigger_delay: float = DEFAULT_MAX_TRIGGER_DELAY

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool = False) -> "ReadOptions":
        what = "source"
        opts = _lower(options)
        _check_known(opts, READ_OPTIONS, what)
        namesrv = _required(opts, "namesrv", what)
        topics, pattern = _subscription(opts, what)
        tags = opts.get("tags", "*").strip() or "*"
        starting, ending = _offsets(opts, topics or None, streaming)
        max_per_trigger, min_per_trigger, delay = _trigger_limits(opts, streaming, what)
        # a stream commits its finished batches' end offsets to the group; a batch read commits nothing,
        # but its pulls name the group (an ACL cluster lets an account use its own groups only)
        group = opts.get("group", "").strip() or None
        timeout_ms = _int(opts, "pullTimeoutMs", 10000, minimum=1, what=what)
        return cls(
            namesrv=namesrv, topics=topics, tags=tags, starting=starting, ending=ending,
            max_offsets_per_trigger=max_per_trigger, group=group,
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True, what),
            min_partitions=_int(opts, "minPartitions", None, minimum=1, what=what),
            max_records_per_partition=_int(opts, "maxRecordsPerPartition", None, minimum=1, what=what),
            pull_timeout=(timeout_ms or 10000) / 1000.0,
            pull_batch_size=_int(opts, "pullBatchSize", 32, minimum=1, what=what) or 32,
            namespace=_namespace(opts, what),
            security=_security(opts, what),
            pattern=pattern, min_offsets_per_trigger=min_per_trigger, max_trigger_delay=delay,
        )


@dataclass(frozen=True)
class WriteOptions:
    """The parsed options of a write."""

    namesrv: str
    #: the topic of rows whose ``topic`` column is null or absent; None: every row must name its topic
    topic: str | None
    producer_group: str = "RMQRUN_SPARK_PRODUCER"
    send_timeout: float = 3.0
    #: the topic and producer group are wrapped in this namespace on the wire
    namespace: str | None = None
    security: ClientSecurity | None = field(default=None, repr=False)
    #: option createTopic: send to a topic the name server does not know (the broker auto-creates it)
    create_topic: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "WriteOptions":
        what = "sink"
        opts = _lower(options)
        _check_known(opts, WRITE_OPTIONS, what)
        namesrv = _required(opts, "namesrv", what)
        topic = None
        if "topic" in opts:
            topics = _topics(opts, what)
            if len(topics) != 1:
                raise OptionError(f"rocketmq sink option topic must name one topic, got {opts['topic']!r}")
            topic = topics[0]
        ms = _int(opts, "sendTimeoutMs", 3000, minimum=1, what=what) or 3000
        group = opts.get("producergroup", "").strip() or cls.producer_group
        return cls(namesrv=namesrv, topic=topic, producer_group=group, send_timeout=ms / 1000.0,
                   namespace=_namespace(opts, what),
                   security=_security(opts, what),
                   create_topic=_bool(opts, "createTopic", False, what))
