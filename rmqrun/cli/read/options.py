"""What ``rmqrun read`` is asked to do: its options, each checked before anything touches the network.

Apart from the command so the reading itself (:mod:`rmqrun.cli.read.command`) stays one concern: a bad value
is one :class:`~rmqrun.errors.ConfigError` naming the option (exit 2), and the combinations that make
no sense (``--to`` with ``--follow``, ``--key`` with ``--group``...) are refused here, not discovered
halfway through a read.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqrun.cli.namespace_option import resolve_namespace
from rmqrun.cli.option_checks import int_option, namesrv_option, tags_option
from rmqrun.cli.read.format import StartAt, parse_from, parse_to
from rmqrun.errors import ConfigError
from rmqrun.namespace import MAX_GROUP_LENGTH
from rmqrun.time_text import iso_ms

if TYPE_CHECKING:
    from rmqrun.remoting.security import ClientSecurity

FORMATS = ("text", "json", "body", "length-prefixed")
#: what --from means with --group and no --from: each queue's committed offset (else the earliest)
COMMITTED = StartAt("committed")


@dataclass
class Options:
    namesrv: str
    topic: str
    start: StartAt
    count: int | None
    follow: bool
    tags: str
    queue: int | None
    fmt: str
    #: topics are read under this namespace (``ns%topic`` on the wire) and printed plain
    namespace: str | None = None
    #: ACL credentials / TLS (flags, RMQRUN_* variables)
    security: "ClientSecurity | None" = None
    #: where each queue stops (exclusive): an offset or a store time; None: the end when the read starts
    to: StartAt | None = None
    #: seconds without a message after which a follow ends (exit 0)
    idle_timeout: float | None = None
    #: the consumer group whose offsets the read starts from and commits; None: commit nothing
    group: str | None = None
    #: print only the messages with this key (QUERY_MESSAGE), or the one with this id, instead of reading queues
    key: str | None = None
    msg_id: str | None = None
    #: how the broker reads ``tags``: TAG, or SQL92 (``--sql``: a selector on the properties)
    expression_type: str = "TAG"


def parse_options(namesrv: str | None, topic: str | None, from_: str | None, count: str | None, follow: bool,
                  tags: str | None, queue: str | None, fmt: str, namespace: str | None = None,
                  to: str | None = None, timeout: str | None = None, group: str | None = None,
                  key: str | None = None, msg_id: str | None = None, sql: str | None = None) -> Options:
    """Check every option before anything touches the network; ConfigError names the bad one."""
    addr = namesrv_option(namesrv)
    if topic is None or not topic.strip():
        raise ConfigError("missing --topic")
    group_name = _group_option(group)
    try:
        start = parse_from(from_) if from_ is not None else COMMITTED if group_name else StartAt("earliest")
        end = None if to is None else parse_to(to)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if end is not None and end.kind == "latest":
        end = None  # the default: the end as the read starts
    _check_order(start, end)
    fmt = fmt.strip().lower()
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r} is not one of: {', '.join(FORMATS)}")
    idle = None if timeout is None else _seconds_option(timeout, "--timeout")
    follow = follow or idle is not None  # --timeout waits for messages, as kafka-console-consumer's does
    if to is not None and follow:
        raise ConfigError("--to reads up to a point and exits; it cannot be combined with --follow or --timeout")
    expression = tags_option(topic, tags)
    if sql is not None:
        if tags is not None:
            raise ConfigError("--sql and --tags: choose one (an SQL92 selector can test TAGS too)")
        if not sql.strip():
            raise ConfigError("--sql '' is empty: give an SQL92 selector, e.g. \"region = 'eu' AND amount > 100\"")
        expression = sql.strip()
    count_n = None if count is None else int_option(count, "--count", 1)
    queue_id = None if queue is None else int_option(queue, "--queue", 0)
    opts = Options(addr, topic.strip(), start, count_n, follow, expression, queue_id, fmt,
                   resolve_namespace(namespace), to=end, idle_timeout=idle, group=group_name,
                   expression_type="SQL92" if sql is not None else "TAG")
    if key is not None or msg_id is not None:
        _lookup_options(opts, key, msg_id, tags, from_)
    return opts


def _lookup_options(opts: Options, key: str | None, msg_id: str | None, tags: str | None,
                    from_: str | None) -> None:
    """``--key`` / ``--msg-id`` find messages through the brokers' index instead of reading queues:
    only a time range (``--from`` / ``--to`` times) and ``--count`` still apply."""
    if key is not None and msg_id is not None:
        raise ConfigError("--key and --msg-id: choose one")
    flag = "--key" if key is not None else "--msg-id"
    value = (key if key is not None else msg_id or "").strip()
    if not value or " " in value:
        raise ConfigError(f"{flag} {value!r} must be one non-empty value without spaces")
    if msg_id is not None and any(ch not in string.hexdigits for ch in value):
        raise ConfigError(f"--msg-id {value!r} is not a message id: a client id (UNIQ_KEY, what producers log) or "
                          "an offset id, both hex digits (e.g. C0A8010A1F2E18B4AAC2512B3F4E0000)")
    clashes = [name for name, given in (("--follow/--timeout", opts.follow), ("--group", opts.group),
                                        ("--queue", opts.queue is not None), ("--tags", tags is not None),
                                        ("--sql", opts.expression_type != "TAG"))
               if given]
    if from_ is not None and opts.start.kind != "time" or opts.to is not None and opts.to.kind != "time":
        clashes.append("--from/--to other than a time")
    if msg_id is not None and (from_ is not None or opts.to is not None):
        clashes.append("--from/--to")
    if clashes:
        raise ConfigError(f"{flag} finds messages by the brokers' index; it cannot be combined with "
                          f"{', '.join(clashes)}")
    if key is not None:
        opts.key = value
    else:
        opts.msg_id = value


def _check_order(start: StartAt, end: StartAt | None) -> None:
    """``--to`` before ``--from`` (both offsets, or both times) would read nothing: refused as ``rmqrun spark``
    refuses it, so a typo is an error, not an empty answer."""
    if end is None or start.kind != end.kind or start.kind not in ("offset", "time"):
        return
    if end.value < start.value:
        def name(at: StartAt) -> str:
            return f"offset {at.value}" if at.kind == "offset" else iso_ms(at.value)
        raise ConfigError(f"--to {name(end)} is before --from {name(start)}: nothing lies between; swap them")


def _group_option(group: str | None) -> str | None:
    if group is None:
        return None
    name = group.strip()
    if len(name) > MAX_GROUP_LENGTH or not re.fullmatch(r"[%|a-zA-Z0-9_-]+", name):
        raise ConfigError(f"--group {group!r} is not a group name (letters, digits, %, |, - and _, at most "
                          f"{MAX_GROUP_LENGTH})")
    return name


def _seconds_option(text: str, flag: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"{flag} {text!r} is not a positive number of seconds")
    return value
