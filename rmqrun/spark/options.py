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

from dataclasses import dataclass, field
from typing import Mapping

from rmqrun.namespace import check_namespace
from rmqrun.remoting.security import ClientSecurity
from rmqrun.spark.errors import OptionError
from rmqrun.spark.offsets import EARLIEST, LATEST, OffsetSpec, parse_offset_spec

# Options Spark itself may add to a source's or sink's options.
_SPARK_INTERNAL = {"path", "paths", "checkpointlocation", "__checkpointlocation"}

#: ACL credentials and TLS, as the settings access_key, secret_key, ... of rmqrun run (secretKeyFile is read
#: where the query is planned; the secret then travels to the executors inside the pickled options)
SECURITY_OPTIONS = ("accessKey", "secretKey", "secretKeyFile", "securityToken", "tls", "tlsCaFile", "tlsCertFile",
                    "tlsKeyFile", "tlsInsecure")
READ_OPTIONS = ("namesrv", "topic", "tags", "startingOffsets", "endingOffsets", "maxOffsetsPerTrigger", "group",
                "failOnDataLoss", "minPartitions", "maxRecordsPerPartition", "pullTimeoutMs", "pullBatchSize",
                "namespace", *SECURITY_OPTIONS)
WRITE_OPTIONS = ("namesrv", "topic", "producerGroup", "sendTimeoutMs", "namespace", *SECURITY_OPTIONS)


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


@dataclass(frozen=True)
class ReadOptions:
    """The parsed options of a read (batch or streaming). Picklable: shipped to executors."""

    namesrv: str
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

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool = False) -> "ReadOptions":
        what = "source"
        opts = _lower(options)
        _check_known(opts, READ_OPTIONS, what)
        namesrv = _required(opts, "namesrv", what)
        topics = _topics(opts, what)
        tags = opts.get("tags", "*").strip() or "*"
        default_start = "latest" if streaming else "earliest"
        starting = parse_offset_spec(opts.get("startingoffsets", default_start), "startingOffsets", topics,
                                     allow_timestamp=True)
        if starting.kind == "latest" and not streaming and "startingoffsets" in opts:
            raise OptionError("rocketmq source option startingOffsets: 'latest' is not allowed in a batch "
                              "query (it would always read nothing); use earliest, a JSON map or timestamp:<ms>")
        if "endingoffsets" in opts:
            if streaming:
                raise OptionError("rocketmq source option endingOffsets is for batch queries only; "
                                  "a streaming query reads until stopped (see trigger(availableNow=True))")
            ending = parse_offset_spec(opts["endingoffsets"], "endingOffsets", topics, allow_timestamp=False)
            if ending.kind == "earliest":
                raise OptionError("rocketmq source option endingOffsets: 'earliest' is not allowed; "
                                  "use latest or a JSON map")
        else:
            ending = LATEST
        max_per_trigger = _int(opts, "maxOffsetsPerTrigger", None, minimum=1, what=what)
        if max_per_trigger is not None and not streaming:
            raise OptionError("rocketmq source option maxOffsetsPerTrigger is for streaming queries only")
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
        )


@dataclass(frozen=True)
class WriteOptions:
    """The parsed options of a write."""

    namesrv: str
    topic: str
    producer_group: str = "RMQRUN_SPARK_PRODUCER"
    send_timeout: float = 3.0
    #: the topic and producer group are wrapped in this namespace on the wire
    namespace: str | None = None
    security: ClientSecurity | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "WriteOptions":
        what = "sink"
        opts = _lower(options)
        _check_known(opts, WRITE_OPTIONS, what)
        namesrv = _required(opts, "namesrv", what)
        topics = _topics(opts, what)
        if len(topics) != 1:
            raise OptionError(f"rocketmq sink option topic must name one topic, got {opts['topic']!r}")
        ms = _int(opts, "sendTimeoutMs", 3000, minimum=1, what=what) or 3000
        group = opts.get("producergroup", "").strip() or cls.producer_group
        return cls(namesrv=namesrv, topic=topics[0], producer_group=group, send_timeout=ms / 1000.0,
                   namespace=_namespace(opts, what),
                   security=_security(opts, what))
