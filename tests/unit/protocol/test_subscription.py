"""Subscriptions must parse, hash and serialise exactly like the Java client's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqrun.protocol.java_order import java_hash_set_order
from rmqrun.protocol.subscription import (
    SUB_ALL,
    SubscriptionData,
    build_subscription_data,
    java_trim,
)
from rmqrun.remoting import fastjson
from rmqrun.remoting.message_props import java_string_hash
from tests import captures

# Printed by Java 17's String.hashCode() for each string.
JAVA_HASHES = {
    "TagA": 2598919,
    "TagB": 2598920,
    "": 0,
    "*": 42,
    "标签": 857175,
    "Ünïcödé": 1055431381,
    "😀": 1772899,  # astral: hashed as two UTF-16 surrogates
    "tag😀x": -826375781,
    "\u00e9": 233,
    "e\u0301": 3900,
    "a-very-long-tag-name-that-overflows-the-int-range-many-times": -1375209669,
    "polygenelubricants": -2147483648,
    "TagA TagB": -1136796543,
}


@pytest.mark.parametrize("text,expected", JAVA_HASHES.items())
def test_tag_hash_is_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected
    if text and text == java_trim(text) and text != SUB_ALL:
        assert build_subscription_data("T", text).codes == (expected,)


def test_golden_heartbeat_subscription_from_capture() -> None:
    # scenario_b heartbeat body, Java 4.9.8: subscribe("ScnB_Topic", "TagA || TagB").
    sub = build_subscription_data("ScnB_Topic", "TagA || TagB", sub_version=1795303787673)
    expected = (
        '{"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG",'
        '"subString":"TagA || TagB","subVersion":1795303787673,"tagsSet":["TagA","TagB"],'
        '"topic":"ScnB_Topic"}'
    )
    assert fastjson.dumps(sub.to_json()).decode() == expected


@captures.requires_captures
def test_every_captured_java_heartbeat_subscription_is_reproduced() -> None:
    """Rebuild each subscription a Java 4.9.8 client sent and compare field by field, in order."""
    checked = 0
    for frame in captures.requests(34):
        if frame["header"].get("language") != "JAVA":
            continue
        body = json.loads(frame.body)
        for consumer in body.get("consumerDataSet", []):
            for sent in consumer["subscriptionDataSet"]:
                ours = build_subscription_data(sent["topic"], sent["subString"], sent["subVersion"]).to_json()
                assert list(ours.items()) == list(sent.items())
                checked += 1
    assert checked > 10


def test_sub_all_forms() -> None:
    for expr in (None, "", "*"):
        sub = build_subscription_data("T", expr, sub_version=5)
        assert sub.sub_string == "*"
        assert sub.tags == () and sub.codes == ()
        assert sub.is_sub_all
        assert sub.to_json() == {
            "classFilterMode": False,
            "codeSet": [],
            "expressionType": "TAG",
            "subString": "*",
            "subVersion": 5,
            "tagsSet": [],
            "topic": "T",
        }


def test_parsing_edges_follow_java() -> None:
    # Results printed by Java's split("\\|\\|") + trim() on the same strings.
    assert build_subscription_data("T", "  x  ||y|| z ").tags == ("x", "y", "z")
    assert build_subscription_data("T", "a|||b").tags == ("a", "|b")
    assert build_subscription_data("T", "a|||b").code_set == {97, 3942}
    assert build_subscription_data("T", "||a||").tags == ("a",)
    assert build_subscription_data("T", "a || a").tags == ("a",)
    # " * " is not SUB_ALL in Java: it subscribes to the literal tag "*".
    star = build_subscription_data("T", " * ")
    assert star.sub_string == " * " and star.tags == ("*",) and not star.is_sub_all
    # Whitespace-only parts: no tags at all, but the expression is kept (Java does the same).
    blank = build_subscription_data("T", " || ")
    assert blank.sub_string == " || " and blank.tags == ()
    for bad in ("||", "||||"):
        with pytest.raises(ValueError, match="no tags"):
            build_subscription_data("T", bad)


def test_java_trim_is_not_unicode_strip() -> None:
    assert java_trim("\x00\t tag \x1f") == "tag"
    assert java_trim("\u00a0tag\u3000") == "\u00a0tag\u3000"  # Java keeps NBSP / ideographic space
    assert build_subscription_data("T", "\u00a0A").tags == ("\u00a0A",)


def test_hash_set_order_matches_java_hashset() -> None:
    # Java printed HashSet iteration order for each expression.
    cases = {
        "TagB||TagA": (["TagA", "TagB"], [2598919, 2598920]),
        "c || b || a || d || e || f || g || h || i || j || k || l || m || n": (
            list("abcdefghijklmn"),
            list(range(97, 111)),
        ),
        "标签 || 😀 || Ünïcödé": (["😀", "标签", "Ünïcödé"], [1772899, 857175, 1055431381]),
    }
    for expr, (tags, codes) in cases.items():
        js = build_subscription_data("T", expr).to_json()
        assert js["tagsSet"] == tags
        assert js["codeSet"] == codes


def test_hash_set_order_forty_tags_three_resizes() -> None:
    expr = (
        "Tag64236 || Tag49164 || Tag29485 || Tag78044 || Tag89380 || Tag66254 || Tag87968 || "
        "Tag96649 || Tag98850 || Tag39534 || Tag31200 || Tag13712 || Tag78708 || Tag88911 || "
        "Tag74495 || Tag89662 || Tag12961 || Tag50738 || Tag71307 || Tag38279 || Tag57842 || "
        "Tag43924 || Tag58883 || Tag77051 || Tag98718 || Tag62004 || Tag5239 || Tag37400 || "
        "Tag66576 || Tag49811 || Tag123 || Tag78073 || Tag58679 || Tag63891 || Tag34535 || "
        "Tag16492 || Tag91818 || Tag17506 || Tag45646 || Tag23234"
    )
    java_tags = (
        "Tag89380,Tag23234,Tag50738,Tag98850,Tag89662,Tag45646,Tag78708,Tag49164,Tag63891,"
        "Tag62004,Tag88911,Tag13712,Tag58883,Tag91818,Tag31200,Tag78073,Tag12961,Tag34535,"
        "Tag74495,Tag96649,Tag37400,Tag38279,Tag49811,Tag16492,Tag66254,Tag123,Tag71307,"
        "Tag5239,Tag29485,Tag64236,Tag66576,Tag77051,Tag87968,Tag43924,Tag17506,Tag78044,"
        "Tag98718,Tag58679,Tag39534,Tag57842"
    ).split(",")
    java_codes = [
        -737007472, -742728456, -740042457, -736109030, -737004649, -740817955, -737957180,
        -740703536, -739028423, -739066178, -737031713, -743647236, -739803018, -736317683,
        -741864614, -737963695, -743674951, -741772260, -738078951, -736170556, -741683946,
        -741655851, -740696967, -743560498, -738944937, -1797419912, -738169562, 114676797,
        -742547632, -739004579, -738941990, -737993550, -737061342, -740874718, -743530021,
        -737963787, -736110107, -739804965, -741623306, -739832934,
    ]
    js = build_subscription_data("T", expr).to_json()
    assert js["tagsSet"] == java_tags
    assert js["codeSet"] == java_codes


def test_small_table_resizes_instead_of_treeifying() -> None:
    # Nine values in bucket 0 of a 16-slot table: Java resizes to 32 rather than treeify,
    # which splits them into buckets 0 and 16.
    values = [i * 16 for i in range(9)]
    assert java_hash_set_order(values, lambda v: v) == [0, 32, 64, 96, 128, 16, 48, 80, 112]


def test_matches_tag_client_refilter() -> None:
    sub = build_subscription_data("T", "TagA || TagB")
    assert sub.matches_tag("TagA") and sub.matches_tag("TagB")
    assert not sub.matches_tag("TagC")
    assert not sub.matches_tag(None)  # no TAGS property: dropped when filtering
    assert not sub.matches_tag("TagA || TagB")  # TAGS is one string, never split
    everything = build_subscription_data("T", "*")
    assert everything.matches_tag(None) and everything.matches_tag("anything")
    sql = SubscriptionData.build("T", "a > 1", "SQL92")
    assert sql.matches_tag(None) and sql.tags == () and sql.sub_string == "a > 1"


def test_hash_collision_passes_broker_but_not_client() -> None:
    # "Aa" and "BB" share Java hash 2112: the broker lets a BB message through for Aa.
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    sub = build_subscription_data("T", "Aa")
    assert sub.matches_tags_code(java_string_hash("BB"))
    assert not sub.matches_tag("BB")
    assert not sub.matches_tags_code(java_string_hash("Cc"))
    assert sub.matches_tags_code(None)
    assert build_subscription_data("T", "*").matches_tags_code(12345)


def test_sql92_needs_an_expression_and_unknown_types_fail() -> None:
    with pytest.raises(ValueError, match="empty"):
        SubscriptionData.build("T", "", "SQL92")
    with pytest.raises(ValueError, match="valid: TAG, SQL92"):
        SubscriptionData.build("T", "x", "REGEX")
    assert SubscriptionData.build("T", "TagA", None).tags == ("TagA",)


def test_json_round_trip_and_equality() -> None:
    sub = build_subscription_data("T", "b || a", sub_version=77)
    again = SubscriptionData.from_json(json.loads(json.dumps(sub.to_json())))
    assert again == sub
    assert again.tags_set == {"a", "b"} and again.code_set == {97, 98}
    bumped = build_subscription_data("T", "b || a", sub_version=78)
    assert bumped.same_filter(sub) and bumped != sub
    assert not build_subscription_data("T", "a || b", sub_version=77).same_filter(sub)  # subString differs


def test_retry_subscription() -> None:
    retry = SubscriptionData.retry("CG", sub_version=9)
    assert retry.topic == "%RETRY%CG" and retry.is_sub_all and retry.sub_version == 9


def test_default_sub_version_is_now_in_ms() -> None:
    import time

    before = int(time.time() * 1000)
    sub = build_subscription_data("T", "*")
    assert before <= sub.sub_version <= int(time.time() * 1000)


@given(st.text(max_size=30))
def test_java_string_hash_reference(text: str) -> None:
    """Independent reference: the polynomial over UTF-16 units, wrapped to signed 32 bits."""
    units = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = 0
    for u in units:
        h = (h * 31 + u) % 2**32
    expected = h - 2**32 if h >= 2**31 else h
    assert java_string_hash(text) == expected


@given(st.lists(st.text(alphabet="abcXYZ _|-", min_size=0, max_size=6), min_size=1, max_size=8))
def test_parsed_tags_are_trimmed_nonempty_and_hashed(parts: list[str]) -> None:
    expr = "||".join(parts)
    try:
        sub = build_subscription_data("T", expr)
    except ValueError:
        assert all(p == "" for p in expr.split("||"))
        return
    for tag in sub.tags:
        assert tag and tag == tag.strip(" ")
    assert sub.code_set == {java_string_hash(t) for t in sub.tags}
