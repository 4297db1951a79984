"""The message property codec: RocketMQ's property names and their ``name\\x01value\\x02`` text form.

Properties travel as one string in a stored record, in a send request's
header and in a batch body; this is that string's codec, plus the tags hash
the broker derives from the TAGS property. No I/O, nothing about records.
"""

from __future__ import annotations

from typing import Mapping

from rmqrun.remoting.errors import PropertyTextError

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# Property names (MessageConst).
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_CLUSTER = "CLUSTER"

#: properties the client or broker sets itself (Java refuses them as user properties): a user value given
#: for one (``rmqrun produce --property``, a sink row's ``properties``) would be overwritten or misread
SYSTEM_PROPERTIES = frozenset({
    PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_WAIT_STORE_MSG_OK, PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_RETRY_TOPIC, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_MIN_OFFSET, PROPERTY_MAX_OFFSET, PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_RECONSUME_TIME,
    PROPERTY_MAX_RECONSUME_TIMES, PROPERTY_CONSUME_START_TIMESTAMP, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_SHARDING_KEY, PROPERTY_CLUSTER,
})

def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()``: 31-polynomial over UTF-16 code units, signed 32-bit.

    The broker stores this for a message's TAGS as the consume-queue tags code,
    and a subscription's codeSet holds it for each tag.
    """
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tags_code(tags: str | None) -> int:
    """The consume-queue tags code of a message (0 when it has no tags)."""
    return java_string_hash(tags) if tags else 0


#: what each separator does in the properties string, for the refusal's wording
_SEPARATOR_ROLE = {
    PROPERTY_SEPARATOR: "to separate properties",
    NAME_VALUE_SEPARATOR: "to separate a property's name from its value",
}

#: properties that a message's own fields set: a refusal names the field the caller filled in
_FIELD_OF_PROPERTY = {PROPERTY_KEYS: "keys", PROPERTY_TAGS: "tags", PROPERTY_SHARDING_KEY: "sharding key",
                      "INSTANCE_ID": "namespace"}


def check_property_text(what: str, text: str) -> None:
    """Refuse ``text`` (the field ``what``) if the properties string cannot carry it as it is.

    A ``\\x02`` or ``\\x01`` inside a key, a tag or a value would be read back as the
    end of that property and the start of another: ``order-1\\x02DELAY\\x013`` sent as
    keys becomes keys ``order-1`` plus a 10-second delay, so a key taken from outside
    could schedule or reshape a message. The Java client joins the text without a
    check (``messageProperties2String``); refusing it is the only safe answer, since
    any escaping would change what a Java consumer reads. Text holding lone
    surrogates (bytes that were not UTF-8, as Python hands over a bad command line)
    cannot be encoded at all, so it is refused here too, with the field named.
    """
    for sep, role in _SEPARATOR_ROLE.items():
        if sep in text:
            code = ord(sep)
            raise PropertyTextError(f"{what} contains the control character \\x{code:02x} (U+{code:04X}), "
                                    f"which RocketMQ uses {role}: {text!r}")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise PropertyTextError(f"{what} is not valid UTF-8 text: {text!r} holds {text[exc.start]!r} "
                                    "(bytes that were not UTF-8?)") from None


def check_properties(props: Mapping[str, str]) -> None:
    """Every name and value of ``props`` through :func:`check_property_text`, named as the caller set it."""
    for name, value in props.items():
        check_property_text(f"property name {name!r}", name)
        check_property_text(_FIELD_OF_PROPERTY.get(name, f"property {name!r}"), value)


def properties_to_string(props: Mapping[str, str]) -> str:
    """``name\\x01value`` pairs joined by ``\\x02``, as the 4.9.8 Java client and broker write them.

    (5.x and the C++ client add a trailing separator; the decoder accepts both.) Every
    name and value is checked first (:func:`check_properties`): this is the one place a
    client builds the string, so no way of sending can skip the check.
    """
    check_properties(props)
    return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items())


def string_to_properties(text: str) -> dict[str, str]:
    """The inverse; tolerates a trailing separator or none (4.9.8 writes none, 5.x and C++ one)."""
    if not text:
        return {}
    try:
        # fast path: every item is name\x01value
        return dict(item.split(NAME_VALUE_SEPARATOR, 1) for item in text.rstrip(PROPERTY_SEPARATOR)
                    .split(PROPERTY_SEPARATOR))  # type: ignore[misc]
    except ValueError:
        pass
    props: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        if not item:
            continue
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep:
            props[name] = value
    return props
