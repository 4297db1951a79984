"""A topic subscription: the tag expression, its hash codes, and tag matching.

The broker filters a pull by the 32-bit hash of each message's TAGS (kept in the
consume queue), so a subscription carries both the tag strings and their Java
``String.hashCode()`` values, and the heartbeat tells the broker both. Because
different tags can share a hash, the client re-checks the TAGS string of every
pulled message (:meth:`SubscriptionData.matches_tag`, Java's
``PullAPIWrapper.processPullResult``).

Parsing mirrors ``FilterAPI.buildSubscriptionData`` (4.9.8) including its edges:
``None``, ``""`` and ``"*"`` mean everything; the expression is split on ``||``;
each part is trimmed the way Java's ``String.trim()`` trims (every char up to
U+0020, not Unicode whitespace); empty parts are skipped; an expression made only
of ``||`` separators is an error (Java's split returns no parts at all).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rmqrun.protocol.java_order import java_hash_set_order
from rmqrun.remoting.message_props import java_string_hash
from rmqrun.topic_names import retry_topic

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"
EXPRESSION_TYPES = (EXPRESSION_TAG, EXPRESSION_SQL92)

_JAVA_TRIM_CHARS = "".join(chr(c) for c in range(0x21))


def java_trim(text: str) -> str:
    """Java's ``String.trim()``: strip code points <= U+0020 at both ends."""
    return text.strip(_JAVA_TRIM_CHARS)


def _java_int_hash(value: int) -> int:
    return value


@dataclass(slots=True, eq=False)
class SubscriptionData:
    """What a consumer subscribes to on one topic (Java ``SubscriptionData``).

    ``tags`` and ``codes`` keep the distinct tags / hash codes in expression
    order; :attr:`tags_set` / :attr:`code_set` are the sets Java keeps.
    ``sub_version`` is a millisecond timestamp; the broker rejects pulls whose
    version is newer than the one it registered, and the rebalance bumps it when
    the assignment changes so the broker learns the subscription again.
    """

    topic: str
    sub_string: str = SUB_ALL
    tags: tuple[str, ...] = ()
    codes: tuple[int, ...] = ()
    sub_version: int = field(default_factory=lambda: int(time.time() * 1000))
    expression_type: str = EXPRESSION_TAG
    class_filter_mode: bool = False
    _tags_lookup: frozenset[str] = field(init=False, repr=False, default=frozenset())
    _codes_lookup: frozenset[int] = field(init=False, repr=False, default=frozenset())

    def __post_init__(self) -> None:
        self.tags = tuple(dict.fromkeys(self.tags))
        self.codes = tuple(dict.fromkeys(self.codes))
        self._tags_lookup = frozenset(self.tags)
        self._codes_lookup = frozenset(self.codes)

    # --- construction -------------------------------------------------------------
    @classmethod
    def build(
        cls,
        topic: str,
        expression: str | None,
        expression_type: str | None = EXPRESSION_TAG,
        sub_version: int | None = None,
    ) -> "SubscriptionData":
        """FilterAPI.build: parse a tag expression, or keep an SQL92 one verbatim."""
        kwargs: dict[str, Any] = {} if sub_version is None else {"sub_version": sub_version}
        if expression_type is None or expression_type == "" or expression_type == EXPRESSION_TAG:
            tags = _parse_tag_expression(expression)
            sub_string = SUB_ALL if tags is None else expression
            assert sub_string is not None
            tag_list = tags or []
            return cls(
                topic,
                sub_string,
                tuple(tag_list),
                tuple(java_string_hash(t) for t in tag_list),
                expression_type=EXPRESSION_TAG,
                **kwargs,
            )
        if expression_type not in EXPRESSION_TYPES:
            raise ValueError(
                f"unknown expression type {expression_type!r}; valid: {', '.join(EXPRESSION_TYPES)}"
            )
        if not expression:
            raise ValueError(f"an {expression_type} expression cannot be empty")
        return cls(topic, expression, expression_type=expression_type, **kwargs)

    @classmethod
    def retry(cls, consumer_group: str, sub_version: int | None = None) -> "SubscriptionData":
        """The ``%RETRY%<group>`` subscription a clustering consumer adds for itself."""
        return cls.build(retry_topic(consumer_group), SUB_ALL, sub_version=sub_version)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SubscriptionData":
        """Read a heartbeat's subscriptionData entry (what the embedded broker receives)."""
        kwargs: dict[str, Any] = {}
        if data.get("subVersion") is not None:
            kwargs["sub_version"] = int(data["subVersion"])
        return cls(
            topic=str(data["topic"]),
            sub_string=str(data.get("subString") or SUB_ALL),
            tags=tuple(str(t) for t in data.get("tagsSet") or ()),
            codes=tuple(int(c) for c in data.get("codeSet") or ()),
            expression_type=str(data.get("expressionType") or EXPRESSION_TAG),
            class_filter_mode=bool(data.get("classFilterMode", False)),
            **kwargs,
        )

    # --- queries --------------------------------------------------------------------
    @property
    def tags_set(self) -> frozenset[str]:
        return self._tags_lookup

    @property
    def code_set(self) -> frozenset[int]:
        return self._codes_lookup

    @property
    def is_sub_all(self) -> bool:
        return self.sub_string == SUB_ALL

    @property
    def is_tag_type(self) -> bool:
        return self.expression_type in ("", EXPRESSION_TAG)

    def matches_tag(self, tags: str | None) -> bool:
        """Client-side re-filter of a pulled message by its TAGS property.

        Java filters only when the tag set is non-empty (so ``*`` and SQL92
        subscriptions keep everything) and then drops messages without tags.
        """
        if not self._tags_lookup or self.class_filter_mode:
            return True
        return tags is not None and tags in self._tags_lookup

    def matches_tags_code(self, tags_code: int | None) -> bool:
        """Broker-side consume-queue filter (ExpressionMessageFilter.isMatchedByConsumeQueue)."""
        if self.class_filter_mode or not self.is_tag_type:
            return True
        if tags_code is None or self.sub_string == SUB_ALL:
            return True
        return tags_code in self._codes_lookup

    def same_filter(self, other: "SubscriptionData") -> bool:
        """Equal apart from ``sub_version``: whether a re-subscribe changes anything."""
        return (
            self.topic == other.topic
            and self.sub_string == other.sub_string
            and self._tags_lookup == other._tags_lookup
            and self._codes_lookup == other._codes_lookup
            and self.expression_type == other.expression_type
            and self.class_filter_mode == other.class_filter_mode
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SubscriptionData):
            return NotImplemented
        return self.same_filter(other) and self.sub_version == other.sub_version

    def __hash__(self) -> int:
        return hash((self.topic, self.sub_string, self.expression_type))

    # --- wire form --------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The heartbeat's subscriptionData object, keys and set order as fastjson writes them."""
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": java_hash_set_order(self.codes, _java_int_hash),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": java_hash_set_order(self.tags, java_string_hash),
            "topic": self.topic,
        }


def _parse_tag_expression(expression: str | None) -> list[str] | None:
    """Tags of a TAG expression in order, or None when it means "everything"."""
    if expression is None or expression == "" or expression == SUB_ALL:
        return None
    parts = expression.split("||")
    if all(part == "" for part in parts):
        # Java's split drops trailing empty strings, leaving nothing at all.
        raise ValueError(f"tag expression {expression!r} has no tags (subString split error)")
    tags: list[str] = []
    for part in parts:
        tag = java_trim(part)
        if tag:
            tags.append(tag)
    return tags


def build_subscription_data(
    topic: str, expression: str | None, sub_version: int | None = None
) -> SubscriptionData:
    """FilterAPI.buildSubscriptionData: a TAG subscription from ``"TagA || TagB"``, ``"*"``..."""
    return SubscriptionData.build(topic, expression, EXPRESSION_TAG, sub_version)
