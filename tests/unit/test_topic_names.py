"""The names RocketMQ derives or reserves, written once (rmqrun/topic_names.py).

The rules themselves (Java's MixAll / KeyBuilder / TopicValidator), and a scan of the package that fails when a
rule is written again elsewhere: a function of the same name, or a string literal of a retry / DLQ prefix or a
system topic outside ``topic_names.py`` (docstrings, comments and messages that only mention one aside).
"""

from __future__ import annotations

import ast
from pathlib import Path

import rmqrun
from rmqrun import namespace, topic_names as N

PACKAGE = Path(rmqrun.__file__).resolve().parent
#: the literals only topic_names.py may hold
RULE_LITERALS = {N.RETRY_TOPIC_PREFIX, N.DLQ_TOPIC_PREFIX, N.SYSTEM_TOPIC_PREFIX, N.SYSTEM_GROUP_PREFIX,
                 *N.SYSTEM_TOPICS}
#: the functions only topic_names.py may define
RULE_FUNCTIONS = {"retry_topic", "dlq_topic", "pop_retry_topic", "original_topic", "is_retry_topic",
                  "is_dlq_topic", "is_system_topic"}
#: a setting's default that happens to be a system topic: its row in the settings table owns it (issue #34's
#: settings item), not a rule of names
SETTING_DEFAULTS = {("consumer/config.py", "RMQ_SYS_TRACE_TOPIC"), ("broker/config.py", "RMQ_SYS_TRACE_TOPIC"),
                    ("cli/settings.py", "RMQ_SYS_TRACE_TOPIC"), ("cli/broker/command.py", "RMQ_SYS_TRACE_TOPIC"),
                    ("cli/produce/command.py", "RMQ_SYS_TRACE_TOPIC")}


def test_the_group_topics() -> None:
    assert N.retry_topic("G") == "%RETRY%G" and N.dlq_topic("G") == "%DLQ%G"
    assert N.is_retry_topic("%RETRY%G") and not N.is_retry_topic("G%RETRY%")
    assert N.is_dlq_topic("%DLQ%G") and not N.is_dlq_topic("%RETRY%G")
    assert N.group_of_retry_topic("%RETRY%ns%G") == "ns%G" and N.group_of_dlq_topic("%DLQ%G") == "G"


def test_the_pop_retry_topics() -> None:
    assert N.pop_retry_topic("G", "T") == "%RETRY%G_T" and N.pop_retry_topic("G", "T", v2=True) == "%RETRY%G+T"
    assert N.is_pop_retry_v2("%RETRY%G+T") and not N.is_pop_retry_v2("%RETRY%G_T") and not N.is_pop_retry_v2("a+b")
    for v2 in (False, True):
        assert N.original_topic(N.pop_retry_topic("G", "T_x", v2=v2), "G") == "T_x"
    assert N.original_topic("%RETRY%H_T", "G") == "%RETRY%H_T"  # another group's: not this group's pop retry
    assert N.original_topic("T", "G") == "T"


def test_the_system_names() -> None:
    assert len(N.SYSTEM_TOPICS) == len(set(N.SYSTEM_TOPICS)) == 9
    for name in (*N.SYSTEM_TOPICS, "rmq_sys_anything"):
        assert N.is_system_topic(name) and namespace.is_system(name)
    assert N.is_system_group("CID_RMQ_SYS_TRANS") and namespace.is_system("CID_RMQ_SYS_TRANS")
    assert not N.is_system_topic("Orders") and not namespace.is_system("Orders")
    assert namespace.wrap("ns", "TBW102") == "TBW102" and namespace.wrap("ns", "%RETRY%G") == "%RETRY%ns%G"


def _docstrings(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            out.add(id(body[0].value))
    return out


def copies_of_the_rules(root: Path = PACKAGE) -> list[str]:
    """Every place outside topic_names.py that writes a name rule again."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "topic_names.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in RULE_FUNCTIONS:
                found.append(f"{rel}:{node.lineno}: def {node.name}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if node.value in RULE_LITERALS and (rel, node.value) not in SETTING_DEFAULTS:
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
    return found


def test_each_name_rule_is_written_once() -> None:
    assert copies_of_the_rules() == []


def test_the_scan_sees_a_copy(tmp_path: Path) -> None:
    # so the test above cannot pass by seeing nothing
    (tmp_path / "a.py").write_text('"""Mentions %RETRY% in a docstring."""\nP = "%RETRY%"\n'
                                   'def dlq_topic(g):\n    return "%DLQ%" + g\n')
    assert sorted(copies_of_the_rules(tmp_path)) == ["a.py:2: '%RETRY%'", "a.py:3: def dlq_topic", "a.py:4: '%DLQ%'"]
