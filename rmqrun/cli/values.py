"""Parsers and checks for setting values, shared by flags, YAML and the environment.

A parser takes what the user wrote (a YAML scalar, or the string of a flag or
variable) and returns the typed value, or raises :class:`ValueError` whose
text says *what is allowed*; the settings table adds the key, the value and
where it came from. Strings from flags and variables are parsed the same way
as YAML scalars, so ``RMQRUN_ORDERLY=yes`` and ``orderly: yes`` agree.

Name rules follow the Java client's ``Validators`` (topic and group names) so
that a name refused here would also be refused by a broker, only later.
"""

from __future__ import annotations

import re
import time
from typing import Any

from rmqrun.namespace import MAX_GROUP_LENGTH, check_namespace

_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
               "g": 1024**3, "gb": 1024**3, "gib": 1024**3}
_NAME_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_REF_RE = re.compile(rf"^{_IDENT}(\.{_IDENT})*(:{_IDENT}(\.{_IDENT})*)?$")
_HOST_PORT_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if _scalar(value) else ""
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false (also yes/no, on/off, 1/0)")


def parse_int(value: Any) -> int:
    if isinstance(value, bool) or not _scalar(value):
        raise ValueError("expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise ValueError("expected an integer")
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError("expected an integer") from None


def parse_float(value: Any) -> float:
    if isinstance(value, bool) or not _scalar(value):
        raise ValueError("expected a number")
    try:
        out = float(value)
    except ValueError:
        raise ValueError("expected a number") from None
    if out != out or out in (float("inf"), float("-inf")):
        raise ValueError("expected a finite number")
    return out


def parse_size(value: Any) -> int:
    """Bytes from ``512MiB``, ``2g``, ``1048576``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not _scalar(value):
        raise ValueError("expected a size such as 512MiB, 2GiB or a number of bytes")
    text = str(value).strip().lower().replace(" ", "")
    num = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(num):]
    try:
        amount = float(num)
    except ValueError:
        amount = -1.0
    if unit not in _SIZE_UNITS or not num or amount < 0:
        raise ValueError("expected a size such as 512MiB, 2GiB or a number of bytes")
    return int(amount * _SIZE_UNITS[unit])


def parse_str(value: Any) -> str:
    if not _scalar(value):
        raise ValueError("expected a string")
    text = str(value).strip()
    if not text:
        raise ValueError("expected a non-empty string")
    return text


def parse_lower(value: Any) -> str:
    return parse_str(value).lower()


def parse_tags(value: Any) -> str:
    """A tag expression; empty means every tag, as in Java. One with no tag at all (``'||'``) is
    refused here, as the consumer would refuse it at start."""
    if isinstance(value, str) and not value.strip():
        return "*"
    text = parse_str(value)
    from rmqrun.protocol.subscription import build_subscription_data
    try:
        build_subscription_data("T", text)
    except ValueError:
        raise ValueError("a tag expression needs at least one tag, e.g. 'TagA' or 'TagA || TagB' "
                         "('*' or empty: every tag)") from None
    return text


def parse_sql(value: Any) -> str:
    """An SQL92 selector, kept verbatim for the broker to compile (as Java's client sends it); an empty one is
    refused, as the broker would refuse it."""
    if isinstance(value, str) and not value.strip():
        raise ValueError("an SQL92 selector cannot be empty, e.g. \"region = 'eu' AND amount > 100\"")
    return parse_str(value)


def split_subscription(text: str) -> tuple[str, str | None]:
    """``TOPIC`` or ``TOPIC:TAGS`` (a topic name has no ``:``) to the topic and its own tags, if any."""
    topic, sep, tags = text.partition(":")
    return parse_name(topic.strip()), (parse_tags(tags) if sep else None)


def parse_subscriptions(value: Any) -> dict[str, str]:
    """A mapping of topic to tag expression (YAML ``subscriptions:``; ``null`` tags: every tag), or the
    same as YAML flow text (``RMQRUN_SUBSCRIPTIONS='{Orders: "TagA || TagB", Audit: "*"}'``)."""
    if isinstance(value, str):
        import yaml
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            value = None
    if not isinstance(value, dict) or not value:
        raise ValueError("a mapping of topic to tag expression, e.g. {Orders: 'TagA || TagB', Audit: '*'}")
    out: dict[str, str] = {}
    for topic, tags in value.items():
        try:
            name = parse_name(topic)
        except ValueError as exc:
            raise ValueError(f"topic {topic!r}: {exc}") from None
        try:
            out[name] = "*" if tags is None else parse_tags(tags)
        except ValueError as exc:
            raise ValueError(f"tags of {name}: {exc}") from None
    return out


def parse_ref(value: Any) -> str:
    """A ``module:function`` reference (the function part defaults to ``handle``)."""
    text = parse_str(value)
    if not _REF_RE.match(text):
        module, _, attr = text.partition(":")
        if module.endswith(".py") or "/" in module or "\\" in module:
            parts = module.removesuffix(".py").replace("\\", "/").split("/")
            dotted = ".".join(p for p in parts if p not in ("", "."))  # ./jobs/app.py -> jobs.app
            raise ValueError(f"expected module:function, not a file path; did you mean {dotted}:{attr or 'handle'}?")
        raise ValueError("expected module:function, e.g. myapp.handlers:handle")
    return text


def parse_name(value: Any) -> str:
    """A topic or group name: letters, digits, ``%``, ``|``, ``_``, ``-``; at most 127 characters."""
    text = parse_str(value)
    if len(text) > 127 or not _NAME_RE.match(text):
        raise ValueError("letters, digits, '%', '|', '_' and '-' only, at most 127 characters")
    return text


def parse_group(value: Any) -> str:
    """A consumer group name: the characters of :func:`parse_name`, at most 255 (Java's group limit)."""
    text = parse_str(value)
    if len(text) > MAX_GROUP_LENGTH or not _NAME_RE.match(text):
        raise ValueError(f"letters, digits, '%', '|', '_' and '-' only, at most {MAX_GROUP_LENGTH} characters")
    return text


def parse_namespace(value: Any) -> str | None:
    """An instance namespace (``MQ_INST_xxx``): letters, digits, ``_``, ``-``; empty means none."""
    return check_namespace(parse_str(value))


def parse_namesrv(value: Any) -> str:
    """``host:port`` or several joined by ``;`` (the Java client's NAMESRV_ADDR form)."""
    text = parse_str(value)
    parts = [p.strip() for p in text.split(";") if p.strip()]
    allowed = "host:port, or several separated by ';', e.g. 10.0.0.1:9876;10.0.0.2:9876"
    if text.strip().isdigit():  # -n was a count in produce and read: say what -n is now
        allowed += " (-n is the name server, as in mqadmin; a count is --count)"
    if not parts:
        raise ValueError(allowed)
    for part in parts:
        m = _HOST_PORT_RE.match(part)
        if m is None or not 1 <= int(m.group(2)) <= 65535:
            raise ValueError(allowed)
    return ";".join(parts)


def parse_timestamp(value: Any) -> str:
    """``yyyyMMddHHmmss`` (local time), the Java consumer's consumeTimestamp format."""
    text = parse_str(value)
    try:
        time.strptime(text, "%Y%m%d%H%M%S")
    except ValueError:
        raise ValueError("a time as yyyyMMddHHmmss, e.g. 20240131235900") from None
    if len(text) != 14:
        raise ValueError("a time as yyyyMMddHHmmss, e.g. 20240131235900")
    return text
