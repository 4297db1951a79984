"""One mapping from an exception to ``rmqrun``'s exit code, matching ``config/README.md``'s table.

Also: ``rmqrun --version`` loads no command module (they are imported when a
command runs or ``--help`` lists them), and every command keeps its place.
"""

from __future__ import annotations

import errno
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rmqrun.broker.store.errors import DataDirError, StoreLockedError
from rmqrun.cli import exit_codes
from rmqrun.cli.exit_codes import EXIT_CONFIG, EXIT_HANDLER, EXIT_INTERRUPTED, EXIT_RUNTIME, exit_code_for
from rmqrun.admin.status import StatusError, UnknownGroupError
from rmqrun.errors import ConfigError, RmqrunError
from rmqrun.remoting.errors import AccessDeniedError, TlsError
from rmqrun.handler.loading import HandlerLoadError

README = Path(__file__).resolve().parents[3] / "config" / "README.md"


def _data_dir_error(cause: BaseException | None, cls: type[DataDirError] = DataDirError) -> DataDirError:
    exc = cls("/d") if cls is StoreLockedError else cls("/d", "cannot write")
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize("exc, code", [
    (ConfigError("bad"), EXIT_CONFIG),
    (HandlerLoadError("no module"), EXIT_HANDLER),  # a ConfigError, but its own code
    (RmqrunError("x"), EXIT_RUNTIME),
    (StatusError("x"), EXIT_RUNTIME),
    (UnknownGroupError("x"), EXIT_RUNTIME),
    (AccessDeniedError(1, "AclException"), EXIT_RUNTIME),
    (TlsError("handshake"), EXIT_RUNTIME),
    (OSError("refused"), EXIT_RUNTIME),
    (TimeoutError(), EXIT_RUNTIME),
    (RuntimeError("pyspark"), EXIT_RUNTIME),
    (KeyboardInterrupt(), EXIT_INTERRUPTED),
    (_data_dir_error(PermissionError(errno.EACCES, "read-only")), EXIT_CONFIG),
    (_data_dir_error(OSError(errno.ENOSPC, "full")), EXIT_RUNTIME),
    (_data_dir_error(OSError(errno.EDQUOT, "quota")), EXIT_RUNTIME),
    (_data_dir_error(None, StoreLockedError), EXIT_RUNTIME),
])
def test_each_exception_type_has_its_code(exc: BaseException, code: int) -> None:
    assert exit_code_for(exc) == code


def test_status_errors_are_rmqrun_errors() -> None:
    assert issubclass(StatusError, RmqrunError) and issubclass(UnknownGroupError, StatusError)


def test_the_docstring_table_and_the_readme_table_name_the_same_codes() -> None:
    readme = README.read_text(encoding="utf-8")
    section = readme[readme.index("### Exit codes"):]
    table = section[:section.index("\n\n", section.index("| code"))]
    readme_codes = {int(c) for c in re.findall(r"^\| (\d+) \|", table, re.M)}
    doc_codes = {int(c) for c in re.findall(r"^(\d+)\s{2,}\S", exit_codes.__doc__ or "", re.M)}
    assert readme_codes == {0, 1, 2, 3}
    assert readme_codes <= doc_codes == {0, 1, 2, 3, 130}
    assert {exit_codes.EXIT_OK, EXIT_RUNTIME, EXIT_CONFIG, EXIT_HANDLER, EXIT_INTERRUPTED} == doc_codes


def test_fail_prints_one_line_and_exits_with_the_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as end:
        exit_codes.fail(HandlerLoadError("cannot import 'nope'"))
    assert end.value.code == EXIT_HANDLER
    assert capsys.readouterr().err == "rmqrun: error: cannot import 'nope'\n"
    with pytest.raises(SystemExit) as end:
        exit_codes.fail(TimeoutError())
    assert end.value.code == EXIT_RUNTIME
    assert capsys.readouterr().err == "rmqrun: error: TimeoutError\n"


def test_version_loads_no_command_module() -> None:
    probe = ("import sys; from rmqrun.cli.main import main; sys.argv = ['rmqrun', '--version']\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.startswith(('rmqrun.cli.', 'rmqrun.client', "
             "'rmqrun.supervisor', 'rmqrun.broker', 'rmqrun.spark'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "['rmqrun.cli.main']"


def test_every_command_is_listed_and_loads() -> None:
    from rmqrun.cli.main import COMMANDS, cli
    import click
    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(COMMANDS) == [
        "broker", "check", "demo", "dlq", "exporter", "group", "offsets", "produce", "read", "run", "spark", "status", "topic",
        "trace"]
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
    assert cli.get_command(ctx, "nope") is None
