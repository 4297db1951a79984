"""Imports run one way, downward (ARCHITECTURE.md, "Seams worth keeping").

Every module of the ``rmqrun`` package is parsed (not imported) and every import
statement in it is collected: module level, inside functions, and under
``if TYPE_CHECKING:`` (a type-only import is still a dependency, and the
push consumer's cycle with its consume services hid there). Each edge between
two parts of the package must be allowed by :data:`ALLOWED`, and no group of
modules may import each other in a circle. A failure prints every offending
edge with its file and line.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import rmqrun

PACKAGE_DIR = Path(rmqrun.__file__).resolve().parent

#: The layer order as what each part may import (besides itself and the standard library / third parties).
#: A name is a part (``client``) or one module of a part (``worker.handler``).
ALLOWED: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in {
    # the bottom: plain data, the root exception, asyncio helpers
    "errors": (),
    "model": (),
    # the names RocketMQ derives or reserves (retry, pop retry, DLQ, system topics): below everyone
    "topic_names": (),
    "aio": (),
    # epoch milliseconds as text for people (ISO 8601 in UTC)
    "time_text": (),
    # which asyncio loop (uvloop or the standard one) a process runs on: the supervisor's and the broker's choice
    "event_loop": ("errors",),
    # each setting's default and check, declared on its dataclass field (rmqrun/setting_rules.py)
    "setting_rules": ("errors",),
    # topic/group names under a namespace (pure functions on names)
    "namespace": ("model", "topic_names"),
    # codecs and the connection
    "remoting": ("errors", "model", "topic_names", "aio"),
    # the wire schema (headers, bodies, subscriptions and tag matching): below both the client and the broker
    "protocol": ("remoting", "model", "topic_names"),
    # routes, typed broker calls, the producer, the retry-topic re-publish
    "client": ("namespace", "protocol", "remoting", "errors", "model", "topic_names", "aio"),
    # the handler contract (results, @batch, WorkerInfo, module:function loading): shared by the worker, Spark
    # and users, so it stands below all of them
    "handler": ("errors",),
    # the supervisor <-> worker contract: frames, the progress block, the BOOT settings
    "pipe": ("namespace", "remoting", "errors", "model", "topic_names", "setting_rules"),
    # the push consumer's logic (rebalance, process queues, offsets, retry)
    "consumer": ("namespace", "client", "protocol", "remoting", "errors", "model", "topic_names", "aio",
                 "setting_rules"),
    # the pull consumer stands on the client, never on the push consumer
    "pull": ("namespace", "client", "protocol", "remoting", "errors", "model", "topic_names", "aio"),
    # the embedded broker: the wire schema and remoting, never the client or consumer logic
    "broker": ("protocol", "remoting", "errors", "model", "topic_names", "aio", "event_loop"),
    # a worker process knows the handler contract, the pipe and the message codec, nothing of the supervisor or
    # RocketMQ clients
    "worker": ("namespace", "handler", "pipe", "remoting", "errors", "model", "topic_names", "aio"),
    # the supervisor runs the consumer and talks to workers through the pipe only (it starts them by name)
    "supervisor": ("namespace", "consumer", "client", "pipe", "remoting", "errors", "model", "topic_names", "aio",
                   "setting_rules"),
    # Spark stands on the pull consumer and the client; it runs handlers with the handler contract
    # (module:function loading, result types), not the worker process or the push consumer
    "spark": ("namespace", "pull", "client", "protocol", "remoting", "errors", "model", "topic_names", "handler"),
    # the operator's calls (group status and lag, POP status, offset resets, DLQ listing and re-drive, topic
    # describe, group mode, the lag exporter's readings) as plain functions returning data: on the client, the
    # pull consumer and the consumer's names, never on click or the command line above it
    "admin": ("namespace", "pull", "consumer", "client", "protocol", "remoting", "errors", "model", "topic_names",
              "aio", "time_text"),
    # the command line sits on top of everything
    "cli": ("rmqrun", "admin", "supervisor", "consumer", "client", "protocol", "pull", "spark", "broker", "worker",
            "handler", "pipe", "remoting", "errors", "model", "topic_names", "aio", "namespace", "setting_rules",
            "event_loop", "time_text"),
    # ``rmqrun`` itself: the public names (the handler API, messages, the pull consumer, lazily)
    "rmqrun": ("namespace", "handler", "pull", "model", "topic_names", "errors"),
}.items()}

#: Cycles inside one part that are known and accepted, each with its reason (a set of module names). Empty: the
#: broker's processors, once a circle with ``broker/broker.py``, see the broker through
#: ``broker/processors/context.py``'s ``BrokerContext``. A new entry needs a reason that survives review.
KNOWN_CYCLES: dict[frozenset[str], str] = {}


@dataclass(frozen=True)
class Edge:
    source: str   # importing module, e.g. rmqrun.worker.main
    target: str   # imported module, e.g. rmqrun.pipe.wire
    where: str    # path:line

    def __str__(self) -> str:
        return f"{self.where}: {self.source} -> {self.target}"


def module_name(path: Path, root: Path = PACKAGE_DIR) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def scan(root: Path = PACKAGE_DIR) -> tuple[set[str], list[Edge]]:
    """Every module under ``root`` and every import edge from one of them to another rmqrun module."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    top = root.name
    edges: list[Edge] = []
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        where = str(path.relative_to(root.parent))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                # ``from pkg import sub`` depends on the submodule; ``from mod import name`` on the module.
                subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in files]
                targets = subs + ([module] if len(subs) < len(node.names) else [])
            for target in targets:
                if target == top or target.startswith(top + "."):
                    edges.append(Edge(name, target, f"{where}:{node.lineno}"))
    return set(files), edges


def part(module: str) -> str:
    """``rmqrun.client.bodies`` -> ``client``; ``rmqrun`` -> ``rmqrun``."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else pieces[0]


def allowed(edge: Edge, table: dict[str, frozenset[str]] = ALLOWED) -> bool:
    source, target = part(edge.source), part(edge.target)
    if source == target:
        return True
    rest = edge.target.split(".", 1)[1] if "." in edge.target else edge.target
    return any(rest == spec or rest.startswith(spec + ".") for spec in table.get(source, ()))


def layer_violations(edges: list[Edge], table: dict[str, frozenset[str]] = ALLOWED) -> list[str]:
    return [f"{e}   ({part(e.source)} may import only: {', '.join(sorted(table.get(part(e.source), ()))) or 'nothing'})"
            for e in edges if not allowed(e, table)]


def cycles(modules: set[str], edges: list[Edge]) -> list[list[Edge]]:
    """Groups of modules that import each other in a circle, as the edges inside each group.

    An edge to one's own enclosing package is left out: importing ``a.b`` runs ``a/__init__.py`` first anyway,
    and a package that imports its submodules lazily is not a cycle in load order.
    """
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for e in edges:
        if e.target in graph and e.target != e.source and not e.source.startswith(e.target + "."):
            graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [[e for e in edges if e.source in g and e.target in g] for g in found]


def test_every_part_has_a_place_in_the_layer_order() -> None:
    modules, _ = scan()
    unplaced = sorted({part(m) for m in modules} - set(ALLOWED))
    assert not unplaced, f"new parts of rmqrun with no place in tests/unit/test_layers.py ALLOWED: {unplaced}"


def test_imports_run_downward() -> None:
    _, edges = scan()
    bad = layer_violations(edges)
    assert not bad, "imports against the layer order (ARCHITECTURE.md):\n" + "\n".join(bad)


def test_no_import_cycles() -> None:
    modules, edges = scan()
    unknown = [c for c in cycles(modules, edges) if frozenset({e.source for e in c}) not in KNOWN_CYCLES]
    assert not unknown, "import cycles:\n" + "\n\n".join("\n".join(map(str, c)) for c in unknown)


def test_importing_the_wire_codec_loads_no_process_or_consumer_layer() -> None:
    """``import rmqrun.remoting.frame`` runs ``rmqrun/__init__`` (the handler contract) and no more.

    Checked in a fresh interpreter, where nothing else has loaded those modules yet: the layer table above
    sees only the import statements, this sees what loading them really pulls in.
    """
    code = ("import sys, rmqrun.remoting.frame\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('rmqrun'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert "rmqrun.remoting.frame" in loaded and "rmqrun.handler.results" in loaded  # the probe itself works
    above = [m for m in loaded
             if part(m) in ("worker", "supervisor", "consumer", "cli", "pipe", "pull", "client", "spark", "broker")]
    assert not above, f"import rmqrun.remoting.frame loads layers above it: {above}"


# ---------------------------------------------------------------- the checker itself (so the above cannot pass
# vacuously)

def test_the_scan_sees_function_level_and_type_checking_imports() -> None:
    _, edges = scan()
    pairs = {(e.source, e.target) for e in edges}
    # a function-level import
    assert ("rmqrun.cli.values", "rmqrun.protocol.subscription") in pairs
    # an import under ``if TYPE_CHECKING:``
    assert ("rmqrun.broker.processors.context", "rmqrun.broker.config") in pairs
    # a relative or plain module import resolves to the module
    assert ("rmqrun.worker.main", "rmqrun.pipe.wire") in pairs


def test_the_checker_flags_an_upward_edge_and_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "rmqrun"
    for sub in ("worker", "supervisor", "consumer"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "worker" / "main.py").write_text("def f():\n    from rmqrun.supervisor import pool\n")
    (pkg / "supervisor" / "pool.py").write_text("")
    (pkg / "consumer" / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                           "    from . import b\n")
    (pkg / "consumer" / "b.py").write_text("from rmqrun.consumer.a import x\n")
    modules, edges = scan(pkg)
    bad = layer_violations(edges)
    assert bad == ["rmqrun/worker/main.py:2: rmqrun.worker.main -> rmqrun.supervisor.pool   "
                   "(worker may import only: aio, errors, handler, model, namespace, pipe, remoting, topic_names)"]
    [cycle] = cycles(modules, edges)
    assert sorted(map(str, cycle)) == ["rmqrun/consumer/a.py:3: rmqrun.consumer.a -> rmqrun.consumer.b",
                                       "rmqrun/consumer/b.py:1: rmqrun.consumer.b -> rmqrun.consumer.a"]


def test_the_table_refuses_the_broker_the_client_and_the_protocol_anything_above_it() -> None:
    # the edges issue #21 removed must stay refused, whatever else the table learns
    for source, target in [("rmqrun.broker.groups", "rmqrun.client.instance"),
                           ("rmqrun.broker.processors.pull", "rmqrun.consumer.puller"),
                           ("rmqrun.protocol.bodies", "rmqrun.client.instance"),
                           ("rmqrun.protocol.headers", "rmqrun.broker.topics"),
                           ("rmqrun.protocol.subscription", "rmqrun.consumer.context"),
                           ("rmqrun.protocol.headers", "rmqrun.worker.handler"),
                           # the admin layer is for programs: never the command line above it (issue #34)
                           ("rmqrun.admin.status", "rmqrun.cli.flags"),
                           ("rmqrun.admin.dlq", "rmqrun.cli.settings")]:
        assert not allowed(Edge(source, target, "x.py:1")), (source, target)
    # and the edges that replaced them are the allowed ones
    for source in ("rmqrun.broker.groups", "rmqrun.client.broker", "rmqrun.consumer.push", "rmqrun.pull.consumer",
                   "rmqrun.spark.source", "rmqrun.admin.status"):
        assert allowed(Edge(source, "rmqrun.protocol.headers", "x.py:1")), source


def test_no_processor_imports_the_broker_it_serves() -> None:
    _, edges = scan()
    back = [str(e) for e in edges
            if e.source.startswith("rmqrun.broker.processors.") and e.target == "rmqrun.broker.broker"]
    assert not back, "processors must see the broker through processors.context.BrokerContext:\n" + "\n".join(back)


def test_the_checker_flags_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    # the shape the broker had: a module that registers processors in a function, processors naming it back
    pkg = tmp_path / "rmqrun"
    (pkg / "broker" / "processors").mkdir(parents=True)
    for init in (pkg, pkg / "broker", pkg / "broker" / "processors"):
        (init / "__init__.py").write_text("")
    (pkg / "broker" / "broker.py").write_text("class Broker:\n    def __init__(self):\n"
                                              "        from rmqrun.broker.processors.registry import register_all\n")
    (pkg / "broker" / "processors" / "registry.py").write_text("from rmqrun.broker.processors import pull\n")
    (pkg / "broker" / "processors" / "pull.py").write_text("from rmqrun.broker.broker import Broker\n")
    (pkg / "broker" / "client_use.py").write_text("from rmqrun.client.headers import Header\n")
    modules, edges = scan(pkg)
    [cycle] = cycles(modules, edges)
    assert {e.source for e in cycle} == {"rmqrun.broker.broker", "rmqrun.broker.processors.registry",
                                         "rmqrun.broker.processors.pull"}
    assert frozenset({e.source for e in cycle}) not in KNOWN_CYCLES
    assert layer_violations(edges) == ["rmqrun/broker/client_use.py:1: rmqrun.broker.client_use -> "
                                       "rmqrun.client.headers   (broker may import only: aio, errors, event_loop, "
                                       "model, protocol, remoting, topic_names)"]
