"""The setting value parsers of ``rmqrun/cli/values.py``, one by one.

The settings table (tested through ``load_settings``) adds the key and the source
to these messages; here each parser is checked for what it accepts, what it
turns it into, and the words it uses to say what is allowed.
"""

from __future__ import annotations

import pytest

from rmqrun.cli import values as v


@pytest.mark.parametrize(("raw", "out"), [(True, True), (False, False), ("Yes", True), (" on ", True),
                                          (1, True), ("0", False), ("off", False)])
def test_parse_bool_accepts_yaml_and_flag_spellings(raw: object, out: bool) -> None:
    assert v.parse_bool(raw) is out


@pytest.mark.parametrize("raw", ["maybe", None, [], 2])
def test_parse_bool_refuses_anything_else(raw: object) -> None:
    with pytest.raises(ValueError, match="expected true or false"):
        v.parse_bool(raw)


@pytest.mark.parametrize(("raw", "out"), [(7, 7), (3.0, 3), (" 12 ", 12), ("-4", -4)])
def test_parse_int(raw: object, out: int) -> None:
    assert v.parse_int(raw) == out


@pytest.mark.parametrize("raw", [2.5, "2.5", True, None, "ten"])
def test_parse_int_refuses_non_integers(raw: object) -> None:
    with pytest.raises(ValueError, match="expected an integer"):
        v.parse_int(raw)


def test_parse_float() -> None:
    assert v.parse_float("0.25") == 0.25
    assert v.parse_float(3) == 3.0
    for raw in (True, None, "fast"):
        with pytest.raises(ValueError, match="expected a number"):
            v.parse_float(raw)
    for raw in ("nan", "inf", "-inf"):
        with pytest.raises(ValueError, match="expected a finite number"):
            v.parse_float(raw)


@pytest.mark.parametrize(("raw", "out"), [(4096, 4096), ("512MiB", 512 * 1024**2), ("2g", 2 * 1024**3),
                                          ("1.5 KiB", 1536), ("100", 100), ("10b", 10)])
def test_parse_size(raw: object, out: int) -> None:
    assert v.parse_size(raw) == out


@pytest.mark.parametrize("raw", [True, None, [], "", "MiB", "12parsecs", "-1k", "1.2.3m"])
def test_parse_size_refuses_what_is_not_a_size(raw: object) -> None:
    with pytest.raises(ValueError, match="expected a size such as 512MiB"):
        v.parse_size(raw)


def test_parse_str_and_lower() -> None:
    assert v.parse_str("  x ") == "x"
    assert v.parse_lower(" INFO ") == "info"
    with pytest.raises(ValueError, match="expected a string"):
        v.parse_str(None)
    with pytest.raises(ValueError, match="non-empty"):
        v.parse_str("   ")


def test_parse_subscriptions_from_a_mapping_or_yaml_text() -> None:
    assert v.parse_subscriptions({"Orders": "TagA || TagB", "Audit": None}) == {
        "Orders": "TagA || TagB", "Audit": "*"}
    assert v.parse_subscriptions('{Orders: "TagA", Audit: "*"}') == {"Orders": "TagA", "Audit": "*"}


@pytest.mark.parametrize(("raw", "words"), [
    ("{Orders: [", "a mapping of topic to tag expression"),   # not YAML at all
    ("Orders", "a mapping of topic to tag expression"),      # YAML, but not a mapping
    ({}, "a mapping of topic to tag expression"),
    ({"bad topic!": "*"}, "topic 'bad topic!': letters, digits"),
    ({"Orders": "||"}, "tags of Orders: a tag expression needs at least one tag"),
])
def test_parse_subscriptions_refusals_name_the_topic(raw: object, words: str) -> None:
    with pytest.raises(ValueError) as err:
        v.parse_subscriptions(raw)
    assert words in str(err.value)


def test_parse_tags_and_split_subscription() -> None:
    assert v.parse_tags("  ") == "*"
    assert v.split_subscription("Orders:TagA || TagB") == ("Orders", "TagA || TagB")
    assert v.split_subscription("Orders") == ("Orders", None)


def test_parse_ref_suggests_the_module_for_a_file_path() -> None:
    assert v.parse_ref("myapp.handlers:handle") == "myapp.handlers:handle"
    with pytest.raises(ValueError, match=r"not a file path; did you mean myapp\.handlers:run\?"):
        v.parse_ref("myapp/handlers.py:run")
    with pytest.raises(ValueError, match=r"did you mean jobs.app:handle\?"):
        v.parse_ref("./jobs/app.py")
    with pytest.raises(ValueError, match="expected module:function, e.g."):
        v.parse_ref("my-app:handle")


@pytest.mark.parametrize("raw", ["T" * 128, "a b", "a/b"])
def test_parse_name_follows_the_java_validators(raw: str) -> None:
    with pytest.raises(ValueError, match="letters, digits"):
        v.parse_name(raw)
    assert v.parse_name("%RETRY%G_1|x-y") == "%RETRY%G_1|x-y"


def test_parse_namesrv() -> None:
    assert v.parse_namesrv(" 10.0.0.1:9876 ; 10.0.0.2:9876 ;") == "10.0.0.1:9876;10.0.0.2:9876"
    assert v.parse_namesrv("[::1]:9876") == "[::1]:9876"
    for raw in (";;", "host", "host:0", "host:70000", "a b:1"):
        with pytest.raises(ValueError, match="host:port, or several separated by ';'"):
            v.parse_namesrv(raw)


def test_parse_timestamp_wants_all_fourteen_digits() -> None:
    assert v.parse_timestamp("20240131235900") == "20240131235900"
    for raw in ("2024-01-31", "20241331000000", "2024013123590"):
        with pytest.raises(ValueError, match="yyyyMMddHHmmss"):
            v.parse_timestamp(raw)


def test_range_checks() -> None:
    # the ranges live with the settings' fields now (rmqrun/setting_rules.py): integers, never a bool or a text
    from rmqrun.setting_rules import at_least, between, positive
    assert between(1, 3)(2) and not between(1, 3)(4) and not between(0, 3)(True) and not between(1, 3)(2.5)
    assert at_least(0)(0) and at_least(0)(0.5) and not at_least(0)(-1) and not at_least(0)("5")
    assert positive(0.1) and not positive(0) and not positive(False)
