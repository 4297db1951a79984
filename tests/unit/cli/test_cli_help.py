"""Every command's ``--help`` tells the reader what an option does when it is not given, and reads like its
neighbours: one meaning per short letter, one set of log levels, one spelling of the TLS flags.

Each command (subcommands of ``topic`` and ``offsets`` included) is rendered with ``--help`` and every
option that takes a value is checked for ``[default: ...]``, ``[required]`` (or a text saying which of a
set is required) or its choices (``[a|b]``). Boolean switches are left out: a switch's default is always
"off", and click shows no default for an off switch on purpose.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Iterator

import click
import pytest
from click.testing import CliRunner

from rmqrun.cli.flags import LOG_LEVELS
from rmqrun.cli.main import COMMANDS, SUMMARIES, cli

#: a short letter -> the long option it is, per family of commands. The pool commands follow gunicorn
#: (-w workers, -c config), the topic commands mqadmin (-w write queues, -c cluster); -n/-t/-g are mqadmin's
#: everywhere, and -n is never a count.
SHORT_FLAGS = {
    "-n": "--namesrv", "-t": "--topic", "-g": "--group", "-h": "--help",
    "-w": "--workers", "-c": "--config", "-m": "--messages", "-f": "--follow",
}
#: where an mqadmin letter differs from the pool commands' (the topic commands are mqadmin's updateTopic)
MQADMIN_TOPIC_FLAGS = {"-w": "--write-queues", "-c": "--cluster", "-b": "--broker", "-r": "--read-queues",
                       "-p": "--perm", "-q": "--queues"}


def commands() -> Iterator[tuple[str, click.Command]]:
    """(path, command) for every command that runs, e.g. ("topic create", ...)."""
    ctx = click.Context(cli)
    for name in sorted(COMMANDS):
        command = cli.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            sub_ctx = click.Context(command, parent=ctx, info_name=name)
            for sub in command.list_commands(sub_ctx):
                yield f"{name} {sub}", command.get_command(sub_ctx, sub)  # type: ignore[misc]
        else:
            yield name, command


ALL = list(commands())


def visible_options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and not p.hidden and p.name != "help"]


@pytest.mark.parametrize(("path", "command"), ALL, ids=[p for p, _ in ALL])
def test_every_option_shows_its_default_choices_or_that_it_is_required(path: str, command: click.Command) -> None:
    rendered = CliRunner().invoke(cli, [*path.split(), "--help"], terminal_width=200)
    assert rendered.exit_code == 0, rendered.output
    ctx = click.Context(command, info_name=path.split()[-1], show_default=True)
    missing = []
    for option in visible_options(command):
        if option.is_flag:
            continue  # a switch: off unless given, nothing to show (see the module docstring)
        record = option.get_help_record(ctx)
        assert record is not None
        spec, text = record
        assert spec.split()[0].rstrip(",") in rendered.output
        shown = ("[default: " in text or "required" in text.rpartition("[")[2]
                 or re.search(r"\[[^]]*\|[^]]*\]", spec) is not None)
        if not shown:
            missing.append(spec)
    assert not missing, f"rmqrun {path}: options showing no default, choices or 'required': {missing}"


def test_placeholders_are_types_not_setting_names() -> None:
    """``--batch-size CONSUME_MESSAGE_BATCH_MAX_SIZE`` was the placeholder; a type or the choices now."""
    text = CliRunner().invoke(cli, ["run", "--help"], terminal_width=200).output
    assert "--batch-size INTEGER" in text and "CONSUME_MESSAGE_BATCH_MAX_SIZE" not in text
    assert "--consume-from [CONSUME_FROM_LAST_OFFSET|CONSUME_FROM_FIRST_OFFSET|" in text
    assert "--allocate [AVG|" in text and "--order-by [queue|key]" in text
    assert re.search(r"-w, --workers INTEGER +worker processes +\[default: CPU count\]", text)


@pytest.mark.parametrize(("path", "command"), ALL, ids=[p for p, _ in ALL])
def test_a_short_letter_means_one_thing(path: str, command: click.Command) -> None:
    expected = {**SHORT_FLAGS, **(MQADMIN_TOPIC_FLAGS if path.startswith("topic ") else {})}
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        shorts = [o for o in param.opts if re.fullmatch(r"-[a-zA-Z]", o)]
        longs = [o for o in param.opts if o.startswith("--")]
        for short in shorts:
            assert short in expected, f"rmqrun {path}: {short} ({longs}) is in no table of short letters"
            assert expected[short] in longs, f"rmqrun {path}: {short} is {longs}, elsewhere {expected[short]}"


def test_n_is_the_name_server_wherever_there_is_one() -> None:
    for path, command in ALL:
        for option in visible_options(command):
            if "--namesrv" in option.opts:
                assert "-n" in option.opts, f"rmqrun {path}: --namesrv without -n"
            if "--count" in option.opts or "--messages" in option.opts:
                assert "-n" not in option.opts, f"rmqrun {path}: -n is a count"


def test_topic_commands_take_the_topic_as_t_too() -> None:
    for path, command in ALL:
        if path.startswith("topic ") and path != "topic list":
            option = next(o for o in visible_options(command) if "--topic" in o.opts)
            assert "-t" in option.opts


def test_one_set_of_log_levels() -> None:
    seen = {}
    for path, command in ALL:
        for option in visible_options(command):
            if "--log-level" in option.opts:
                seen[path] = option.metavar
    assert set(seen) >= {"run", "check", "broker", "demo"}
    assert set(seen.values()) == {"[" + "|".join(LOG_LEVELS) + "]"}, seen


def test_one_spelling_of_the_tls_flags() -> None:
    for path, command in ALL:
        visible = {o for option in visible_options(command) for o in option.opts}
        assert not visible & {"--tls-cert", "--tls-key"}, f"rmqrun {path} shows the older TLS spelling"
        if "--tls-cert-file" in visible or path == "broker":
            assert {"--tls-cert-file", "--tls-key-file"} <= visible, path
    broker = dict(ALL)["broker"]
    hidden = {o for p in broker.params if isinstance(p, click.Option) and p.hidden for o in p.opts}
    assert hidden == {"--tls-cert", "--tls-key"}, "the older spelling stays, hidden, so scripts keep working"


def _records(path: str) -> dict[str, str]:
    """Long option -> its help text as --help renders it."""
    command = dict(ALL)[path]
    ctx = click.Context(command, info_name=path.split()[-1], show_default=True)
    return {o.opts[-1]: o.get_help_record(ctx)[1] for o in visible_options(command)}  # type: ignore[index]


def test_topic_update_shows_that_it_keeps_current_values() -> None:
    update, create = _records("topic update"), _records("topic create")
    for flag in ("--queues", "--read-queues", "--write-queues", "--perm", "--order"):
        assert "[default: unchanged" in update[flag], flag
        assert "[default: unchanged" not in create[flag], flag
    assert create["--write-queues"].startswith("write queue count  [default: 8;")
    assert create["--perm"].endswith("[default: rw]") and create["--order"].endswith("[default: --no-order]")


def test_help_settings_fits_in_100_columns() -> None:
    text = CliRunner().invoke(cli, ["run", "--help-settings"]).output
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "  workers  (-w, --workers, RMQRUN_WORKERS)\n      worker processes. Default: CPU count." in text


def test_the_group_help_lists_each_command_with_its_own_summary_and_imports_none() -> None:
    ctx = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and SUMMARIES[name] == command.get_short_help_str(200), name
    probe = ("import sys; from rmqrun.cli.main import main; sys.argv = ['rmqrun', '--help']\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.startswith(('rmqrun.cli.', 'rmqrun.client', "
             "'rmqrun.supervisor', 'rmqrun.broker', 'rmqrun.spark', 'rmqrun.consumer'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert re.search(r"^  offsets +Move a consumer group's offsets", out, re.M), out
    assert out.splitlines()[-1] == "['rmqrun.cli.main']"


def test_run_help_loads_no_supervisor() -> None:
    # the flags show defaults the settings dataclasses hold (rmqrun/setting_rules.py): those two modules load,
    # none of the supervisor's machinery and no client instance
    probe = ("import sys; from rmqrun.cli.main import main; sys.argv = ['rmqrun', 'run', '--help']\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.startswith(('rmqrun.supervisor', 'rmqrun.client.instance'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == str(["rmqrun.supervisor", "rmqrun.supervisor.pool_config",
                                        "rmqrun.supervisor.run_settings"])
