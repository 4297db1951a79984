"""The namespace rules (Java's NamespaceUtil), from the cases its own tests and documentation name."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqrun.model import MessageQueue
from rmqrun.namespace import (
    check_namespace, has_namespace, is_system, plain_text, unwrap, unwrap_queue, wrap,
    wrap_queue, wrapped_length_error,
)
from rmqrun import topic_names


def retry_topic(namespace: str | None, group: str) -> str:
    """A group's retry topic on the wire, as the engine names it: the topic-name rule of the wrapped group."""
    return topic_names.retry_topic(wrap(namespace, group))


def dlq_topic(namespace: str | None, group: str) -> str:
    return topic_names.dlq_topic(wrap(namespace, group))


NS = "MQ_INST_XXX"


@pytest.mark.parametrize(("plain", "wire"), [
    ("TOPIC_XXX", "MQ_INST_XXX%TOPIC_XXX"),
    ("GID_XXX", "MQ_INST_XXX%GID_XXX"),
    ("%RETRY%GID_XXX", "%RETRY%MQ_INST_XXX%GID_XXX"),
    ("%DLQ%GID_XXX", "%DLQ%MQ_INST_XXX%GID_XXX"),
])
def test_wrap_and_unwrap(plain: str, wire: str) -> None:
    assert wrap(NS, plain) == wire
    assert unwrap(NS, wire) == plain


@pytest.mark.parametrize("wire", ["MQ_INST_XXX%TOPIC_XXX", "%RETRY%MQ_INST_XXX%GID", "%DLQ%MQ_INST_XXX%GID"])
def test_wrapping_a_wrapped_name_changes_nothing(wire: str) -> None:
    assert has_namespace(NS, wire)
    assert wrap(NS, wire) == wire


@pytest.mark.parametrize("name", ["TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRACE_TOPIC", "OFFSET_MOVED_EVENT",
                                  "rmq_sys_anything", "CID_RMQ_SYS_TRANS", "BenchmarkTest", "SELF_TEST_TOPIC"])
def test_system_topics_and_groups_are_never_wrapped(name: str) -> None:
    assert is_system(name)
    assert wrap(NS, name) == name
    assert unwrap(NS, name) == name


def test_another_namespace_is_not_taken_off() -> None:
    """Java: withoutNamespace(%RETRY%MQ_INST_XX2%GID, MQ_INST_XX3) leaves the name as it is."""
    assert unwrap("MQ_INST_XXX1", "%RETRY%MQ_INST_XXX%GID_XXX") == "%RETRY%MQ_INST_XXX%GID_XXX"
    assert unwrap(NS, "other%Orders") == "other%Orders"
    # a namespace that is a prefix of another one's name is not a match either
    assert unwrap("MQ", "MQ_INST%Orders") == "MQ_INST%Orders"
    # ... and a different namespace wraps a name that carries another one
    assert wrap("B", "A%Orders") == "B%A%Orders"


@pytest.mark.parametrize("empty", [None, ""])
def test_no_namespace_is_the_identity(empty: str | None) -> None:
    for name in ("Orders", "%RETRY%G", "a%b", "TBW102"):
        assert wrap(empty, name) == name
        assert unwrap(empty, name) == name
    assert retry_topic(empty, "G") == "%RETRY%G"
    assert dlq_topic(empty, "G") == "%DLQ%G"


def test_retry_and_dlq_topics_of_a_group_wrapped_or_not() -> None:
    assert retry_topic(NS, "GID") == retry_topic(NS, "MQ_INST_XXX%GID") == "%RETRY%MQ_INST_XXX%GID"
    assert dlq_topic(NS, "GID") == dlq_topic(NS, "MQ_INST_XXX%GID") == "%DLQ%MQ_INST_XXX%GID"


def test_queues() -> None:
    mq = MessageQueue("Orders", "broker-a", 3)
    wired = wrap_queue(NS, mq)
    assert wired == MessageQueue("MQ_INST_XXX%Orders", "broker-a", 3)
    assert unwrap_queue(NS, wired) == mq
    assert wrap_queue(None, mq) is mq


@pytest.mark.parametrize("bad", ["a%b", "a b", "ns|x", "x" * 127, "ns/x", "名前"])
def test_bad_namespaces_are_refused_with_what_is_allowed(bad: str) -> None:
    with pytest.raises(ValueError, match="letters, digits"):
        check_namespace(bad)


def test_namespace_values() -> None:
    assert check_namespace(None) is None
    assert check_namespace("  ") is None
    assert check_namespace(" MQ_INST_1-a ") == "MQ_INST_1-a"


def test_wrapped_length() -> None:
    assert wrapped_length_error(NS, "T" * 100, "topic") is None
    msg = wrapped_length_error(NS, "T" * 120, "topic")
    assert msg is not None and "MQ_INST_XXX" in msg and "132 characters" in msg
    assert wrapped_length_error(None, "T" * 127, "topic") is None


_names = st.text(alphabet="abcXYZ019_-|%", min_size=1, max_size=20)
_spaces = st.text(alphabet="abcXYZ019_-", min_size=1, max_size=10)


@given(ns=_spaces, name=_names, prefix=st.sampled_from(["", "%RETRY%", "%DLQ%"]))
def test_unwrap_undoes_wrap(ns: str, name: str, prefix: str) -> None:
    plain = prefix + name
    if has_namespace(ns, plain) or is_system(plain):
        return  # already the wire form: wrap leaves it, unwrap shortens it (the Java behaviour)
    wired = wrap(ns, plain)
    assert has_namespace(ns, wired) and wired.startswith(prefix)
    assert wrap(ns, wired) == wired
    assert unwrap(ns, wired) == plain


def test_log_text_shows_names_plain() -> None:
    line = ("rebalance: now consuming 2 queue(s): %RETRY%MQ_INST_XXX%G@broker-a:0, MQ_INST_XXX%T@broker-a:1; "
            "MessageQueue [topic=MQ_INST_XXX%T, brokerName=b, queueId=0] of group MQ_INST_XXX%G")
    assert plain_text(NS, line) == ("rebalance: now consuming 2 queue(s): %RETRY%G@broker-a:0, T@broker-a:1; "
                                    "MessageQueue [topic=T, brokerName=b, queueId=0] of group G")
    # only where the namespace starts a name
    assert plain_text("NS", "XNS%T and NS_2%T and %DLQ%NS%G") == "XNS%T and NS_2%T and %DLQ%G"
    assert plain_text(None, "MQ_INST_XXX%T") == "MQ_INST_XXX%T"
