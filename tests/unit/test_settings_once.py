"""Each setting's default and each check are written once (issue #34, "settings are copied, not handed on").

The settings dataclasses hold a setting's default and its check on its field (``rmqrun/setting_rules.py``);
``rmqrun run``'s table reads both from there; the pool holds the ``WorkerConfig`` it sends; the embedded
broker holds its store's settings as one ``StoreConfig``. The source is parsed, not imported, so a default or
a check written a second time (a copied field, a row that names its own default, a range tested again in
``validate``) fails here naming both places, however the values happen to agree today.

A setting is known by its row's key wherever it lands (``max_messages_per_worker`` is ``WorkerConfig``'s
``max_messages``); the consumer's values the workers take (``worker_config_for``) are the consumer's
settings; any other field by its name, so the broker's and the store's ``segment_size`` are one setting. The
``rmqrun broker`` flags count too: a flag with a literal default of its own writes its setting's default again.
"""

from __future__ import annotations

import ast
import importlib.util
from collections import defaultdict
from pathlib import Path

import pytest

from rmqrun.broker.config import BROKER_SETTINGS
from rmqrun.cli import settings as table
from rmqrun.cli.main import COMMANDS

ROOT = Path(__file__).resolve().parents[2]

#: every dataclass that holds settings: (file, class)
HOLDERS = (
    ("rmqrun/consumer/config.py", "ConsumerConfig"),
    ("rmqrun/pipe/worker_config.py", "WorkerConfig"),
    ("rmqrun/supervisor/pool_config.py", "PoolConfig"),
    ("rmqrun/supervisor/run_settings.py", "RunSettings"),
    ("rmqrun/supervisor/health.py", "HealthLimits"),
    ("rmqrun/broker/config.py", "BrokerConfig"),
    ("rmqrun/broker/store/config.py", "StoreConfig"),
)
#: methods where a class checks its values
CHECKERS = ("__post_init__", "validate", "_validate_allocation", "_check_security")
#: where the rows live
TABLE = str(Path(table.__file__).resolve().relative_to(ROOT))
#: the ``rmqrun broker`` command, whose flags show the broker's defaults
BROKER_CMD = str(Path(importlib.util.find_spec(COMMANDS["broker"].partition(":")[0]).origin  # type: ignore[union-attr]
                      ).resolve().relative_to(ROOT))
#: its flags named otherwise than the setting they give (``--flush`` is the store's flush_mode)
BROKER_FLAG_SETTING = {"flush": "flush_mode", "broker_port": "port"}
#: the targets whose settings are dataclass fields (the rest carry their defaults in their rows)
BACKED = {"CONSUMER", "WORKER", "POOL", "RUN"}


def parsed(path: str) -> ast.Module:
    return ast.parse((ROOT / path).read_text(encoding="utf-8"))


def class_of(path: str, name: str, tree: ast.Module | None = None) -> ast.ClassDef:
    tree = tree or parsed(path)
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def default_of(value: ast.expr | None) -> ast.expr | None:
    """The default a field declares: ``= x``, ``ruled(x, ...)``, ``field(default=x)`` or a default_factory."""
    if value is None:
        return None
    if isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", "")) in ("ruled",
                                                                                                    "field"):
        found = {k.arg: k.value for k in value.keywords if k.arg in ("default", "default_factory")}
        if value.args:
            return value.args[0]
        return found.get("default", found.get("default_factory"))
    return value


def declared(path: str, name: str, source: str | None = None) -> dict[str, tuple[ast.AnnAssign, str]]:
    """Field name -> (its statement, its declaration's source) of a dataclass."""
    text = source if source is not None else (ROOT / path).read_text(encoding="utf-8")
    cls = class_of(path, name, ast.parse(text))
    return {s.target.id: (s, ast.get_source_segment(text, s) or "") for s in cls.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}


def identities() -> dict[tuple[str, str], str]:
    """(class, field) -> the setting it holds, where that is not the field's own name."""
    out = {(table.FIELDS_OF[s.target].__name__, s.field_name): s.key for s in table.SETTINGS
           if s.target in table.FIELDS_OF}
    # the consumer's values the workers take: worker_config_for(consumer, ...) sets them from the consumer
    func = next(n for n in parsed("rmqrun/supervisor/pool_config.py").body
                if isinstance(n, ast.FunctionDef) and n.name == "worker_config_for")
    call = next(n for n in ast.walk(func) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "WorkerConfig")
    for kw in call.keywords:
        read = [a.attr for a in ast.walk(kw.value) if isinstance(a, ast.Attribute)
                and getattr(a.value, "id", "") == "consumer"]
        if kw.arg and read:
            out[("WorkerConfig", kw.arg)] = out.get(("ConsumerConfig", read[0]), read[0])
    return out


def defaults_written(sources: dict[str, str] | None = None) -> dict[str, list[str]]:
    """Setting -> each place a default for it is written (a field's default, or a row's ``default=``)."""
    sources = sources or {}
    ids = identities()
    where: dict[str, list[str]] = defaultdict(list)
    for path, cls in HOLDERS:
        for fname, (stmt, text) in declared(path, cls, sources.get(path)).items():
            default = default_of(stmt.value)
            if default is None or (isinstance(default, ast.Constant) and default.value is None):
                continue  # no default, or None: "unset", computed when built
            where[ids.get((cls, fname), fname)].append(f"{path}: {cls}.{fname} ({text.strip()})")
    rows = ast.parse(sources.get(TABLE) or (ROOT / TABLE).read_text(encoding="utf-8"))
    for call in ast.walk(rows):
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "_S" and call.args:
            given = [k for k in call.keywords if k.arg == "default"]
            if given and not (isinstance(given[0].value, ast.Constant) and given[0].value.value is None):
                key = call.args[0].value  # type: ignore[attr-defined]
                where[key].append(f"{TABLE}: the row of {key!r} (default={ast.unparse(given[0].value)})")
    for name, text in broker_flag_defaults(sources.get(BROKER_CMD)):
        where[name].append(f"{BROKER_CMD}: {text}")
    return where


def broker_flag_defaults(source: str | None) -> list[tuple[str, str]]:
    """(broker setting, the flag) for each ``rmqrun broker`` flag that writes a literal default of its own."""
    tree = ast.parse(source or (ROOT / BROKER_CMD).read_text(encoding="utf-8"))
    out = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "option"):
            continue
        names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        dest = next((n for n in names if not n.startswith("-")), None)
        dest = dest or max(names, key=len).lstrip("-").replace("-", "_")
        setting = BROKER_FLAG_SETTING.get(dest, dest)
        default = next((k.value for k in call.keywords if k.arg == "default"), None)
        if setting in BROKER_SETTINGS and isinstance(default, ast.Constant) and default.value is not None:
            out.append((setting, f"{names[0]} default={default.value!r}"))
    return out


def twice(where: dict[str, list[str]]) -> dict[str, list[str]]:
    return {k: v for k, v in where.items() if len(v) > 1}


def test_no_setting_has_its_default_written_twice() -> None:
    assert twice(defaults_written()) == {}


def test_the_scan_sees_a_default_written_again() -> None:
    # so the test above cannot pass on a scan that finds nothing: a copy planted in each way it can happen
    pool = (ROOT / "rmqrun/supervisor/pool_config.py").read_text(encoding="utf-8")
    copied = pool.replace("    worker: WorkerConfig\n", "    worker: WorkerConfig\n    kill_grace: float = 10.0\n")
    assert set(twice(defaults_written({"rmqrun/supervisor/pool_config.py": copied}))) == {"kill_grace"}
    worker = (ROOT / "rmqrun/pipe/worker_config.py").read_text(encoding="utf-8")
    derived = worker.replace("time_limit: float = field(kw_only=True)", "time_limit: float = 900.0")
    assert set(twice(defaults_written({"rmqrun/pipe/worker_config.py": derived}))) == {"consume_timeout_minutes"}
    broker = (ROOT / "rmqrun/broker/config.py").read_text(encoding="utf-8")
    flat = broker.replace("    store: StoreConfig = EMBEDDED_STORE\n",
                          "    store: StoreConfig = EMBEDDED_STORE\n    segment_size: int = 256 * 1024 * 1024\n")
    assert set(twice(defaults_written({"rmqrun/broker/config.py": flat}))) == {"segment_size"}
    rows = (ROOT / TABLE).read_text(encoding="utf-8")
    row = rows.replace('"seconds past the time limit before a worker is killed", WORKER)',
                       '"seconds past the time limit before a worker is killed", CLI, default=10.0)')
    assert row != rows and set(twice(defaults_written({TABLE: row}))) == {"kill_grace"}
    flags = (ROOT / BROKER_CMD).read_text(encoding="utf-8")
    flag = flags.replace("default=EMBEDDED_STORE.delete_when,", 'default="04",')
    assert flag != flags and set(twice(defaults_written({BROKER_CMD: flag}))) == {"delete_when"}


def test_a_row_of_a_dataclass_setting_gives_no_default_nor_check() -> None:
    for call in ast.walk(parsed(TABLE)):
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "_S" and len(call.args) >= 4:
            target = getattr(call.args[3], "id", "")
            given = {k.arg for k in call.keywords} & {"default", "check", "allowed"}
            assert not (target in BACKED and given), (call.args[0].value, given)  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match=r"'kill_grace' gives its default again: they are written on "
                                        r"WorkerConfig.kill_grace"):
        table._S("kill_grace", float, "seconds", table.WORKER, default=10.0)


def checks_repeated(sources: dict[str, str] | None = None) -> list[str]:
    """Each ordering test of a field that has a Rule, inside a method where its class checks values: the Rule
    already holds that check (equality with a word, a condition between fields, is not a check of the value)."""
    sources = sources or {}
    found = []
    for path, cls in HOLDERS:
        text = sources.get(path) or (ROOT / path).read_text(encoding="utf-8")
        ruled = {name for name, (stmt, _) in declared(path, cls, text).items()
                 if isinstance(stmt.value, ast.Call) and getattr(stmt.value.func, "id", "") == "ruled"}
        for method in class_of(path, cls, ast.parse(text)).body:
            if not (isinstance(method, ast.FunctionDef) and method.name in CHECKERS):
                continue
            for node in ast.walk(method):
                if not isinstance(node, ast.Compare):
                    continue
                ordering = any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn))
                               for op in node.ops)
                named = {a.attr for a in ast.walk(node) if isinstance(a, ast.Attribute)
                         and getattr(a.value, "id", "") == "self"}
                if ordering and named & ruled:
                    found.append(f"{path}: {cls}.{method.name} checks {sorted(named & ruled)} again: "
                                 f"{ast.unparse(node)}")
    return found


def test_no_value_is_checked_twice() -> None:
    assert checks_repeated() == []


def test_the_scan_sees_a_check_written_again() -> None:
    pool = (ROOT / "rmqrun/supervisor/pool_config.py").read_text(encoding="utf-8")
    again = pool.replace("        check_fields(self)\n",
                         "        check_fields(self)\n        if self.workers < 1:\n            raise ValueError\n")
    assert again != pool and checks_repeated({"rmqrun/supervisor/pool_config.py": again}) == [
        "rmqrun/supervisor/pool_config.py: PoolConfig.__post_init__ checks ['workers'] again: self.workers < 1"]


def test_every_setting_of_a_dataclass_row_reads_its_fields_default_and_rule() -> None:
    # the rows hold no value of their own: what the table shows and checks is the field's
    import dataclasses

    from rmqrun.setting_rules import rule_of
    for s in table.SETTINGS:
        cls = table.FIELDS_OF.get(s.target)
        if cls is None:
            continue
        f = {x.name: x for x in dataclasses.fields(cls)}[s.field_name]
        assert s.default == (None if f.default is dataclasses.MISSING else f.default), s.key
        rule = rule_of(f)
        if rule is not None:
            assert (s.choices, s.allowed) == ((rule.choices, "") if rule.choices else (None, rule.allowed)), s.key
