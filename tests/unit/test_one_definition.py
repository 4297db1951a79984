"""Ideas the engine, the pipe, the worker, the client and the broker share are defined once (issue #34).

The consume outcome (once ``Verdict`` in the engine and ``Status`` on the pipe, equal only by a comment), the
stored-record type, the AVG / AVG_BY_CIRCLE allocation (once copied into the broker) and the saved two-level
table (once twice, the name server's KV table and the broker's request-mode table): each is one definition
that every side imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rmqrun
from rmqrun import model
from rmqrun.broker import kv_config, queue_allocation, request_modes
from rmqrun.broker.store.saved_table import SavedTable
from rmqrun.consumer import allocate, executor
from rmqrun.pipe import wire
from rmqrun.protocol import allocation

PACKAGE = Path(rmqrun.__file__).resolve().parent


def _definitions(name: str) -> list[str]:
    """Every module of the package that defines ``name`` (a class, a function or an assignment)."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            defined = ([node.name] if isinstance(node, (ast.ClassDef, ast.FunctionDef)) else
                       [t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign) else
                       [node.target.id] if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                       else [])
            if name in defined:
                out.append(path.relative_to(PACKAGE).as_posix())
    return out


def test_one_consume_outcome_shared_by_the_engine_and_the_pipe() -> None:
    assert executor.Status is wire.Status is model.Status
    assert _definitions("Status") == ["model.py"]
    assert _definitions("Verdict") == ["supervisor/health.py"]  # the health endpoints' (ok, reason): another idea
    # the byte on the pipe is the outcome's value
    assert [int(s) for s in model.Status] == list(range(7))


def test_one_record_type() -> None:
    assert executor.RecordData is wire.RecordData is model.RecordData
    assert _definitions("RecordData") == ["model.py"]


def test_one_allocation_for_the_client_and_the_broker() -> None:
    assert queue_allocation.STRATEGIES is allocation.STRATEGIES
    assert queue_allocation.allocate_averagely is allocation.allocate_averagely
    for name in ("allocate_averagely", "allocate_by_circle", "average_slice", "_average_slice"):
        assert _definitions(name) in ([], ["protocol/allocation.py"]), name
    assert allocate.AllocateAveragely.name in allocation.STRATEGIES


def test_one_saved_table_for_the_kv_and_request_mode_tables(tmp_path: Path) -> None:
    assert issubclass(kv_config.KVConfigTable, SavedTable)
    assert isinstance(request_modes.RequestModeTable(None)._saved, SavedTable)


def test_the_definition_finder_sees_a_definition() -> None:
    # so the tests above cannot pass by finding nothing
    assert _definitions("MessageQueue") == ["model.py"]
    assert "protocol/requests.py" in _definitions("SPECS")
