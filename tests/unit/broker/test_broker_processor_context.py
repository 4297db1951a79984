"""The broker's processors see it through ``BrokerContext``, and that Protocol names exactly what they use.

``broker/processors/context.py`` replaced the processors' import of ``Broker`` (issue #21: a circle of nine
modules). A Protocol only helps if it is true in both directions: every member a processor reads is declared (or
the processor quietly depends on more of the broker than the interface says), and every declared member is read
by some processor (or the interface is wider than it claims). Both are checked on the source, and a real
``Broker`` is checked to satisfy it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from rmqrun.broker.broker import Broker
from rmqrun.broker.config import BrokerConfig
from rmqrun.broker.processors import context
from rmqrun.broker.processors.context import BrokerContext

PROCESSORS = Path(context.__file__).resolve().parent


def declared_members() -> set[str]:
    tree = ast.parse(Path(context.__file__).read_text(encoding="utf-8"))
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "BrokerContext"]
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
    return names


def members_read(source: str) -> set[str]:
    """Attributes read off the broker: ``self.broker.X``, and ``X`` of a local bound to ``self.broker`` or of a
    ``broker`` parameter (the registry, the constructors)."""
    tree = ast.parse(source)
    aliases = {"broker"}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Attribute) and node.value.attr == "broker"
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"):
            aliases.add(node.targets[0].id)
    used: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr == "broker" and isinstance(base.value, ast.Name) \
                and base.value.id == "self":
            used.add(node.attr)
        elif isinstance(base, ast.Name) and base.id in aliases:
            used.add(node.attr)
    return used


def test_the_context_names_exactly_what_the_processors_use() -> None:
    used: dict[str, set[str]] = {}
    for path in sorted(PROCESSORS.glob("*.py")):
        if path.name in ("context.py", "__init__.py"):
            continue
        for name in members_read(path.read_text(encoding="utf-8")):
            used.setdefault(name, set()).add(path.name)
    declared = declared_members()
    undeclared = {n: sorted(files) for n, files in used.items() if n not in declared}
    assert not undeclared, f"processors use broker members BrokerContext does not declare: {undeclared}"
    unused = sorted(declared - set(used))
    assert not unused, f"BrokerContext declares members no processor uses (narrow it): {unused}"


def test_the_checker_sees_a_member_read_through_an_alias() -> None:
    # so the test above cannot pass by seeing nothing
    src = ("class P:\n    def f(self):\n        b = self.broker\n        b.acl.check()\n"
           "        return self.broker.store\n")
    assert members_read(src) == {"acl", "store"}
    assert {"store", "topics", "put_message", "address", "in_disk"} <= declared_members()


def test_a_broker_satisfies_the_context(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path, port=0))
    assert isinstance(broker, BrokerContext)
    # the registry was handed this broker and registered the processors on its server
    assert broker.processors.pull.broker is broker
    assert broker.server.processors
