"""The ``rmqrun`` command: the group, and where each subcommand lives.

Commands: ``run`` (the worker-pool consumer), ``check`` (what ``run`` would
verify, without consuming), ``produce``, ``status`` (consumer progress and
lag), ``read`` (print a topic's messages), ``spark`` (a handler over a topic
on Spark), ``topic`` and ``offsets`` (what operators do with mqadmin),
``demo`` (everything on one machine), ``broker`` (the embedded name
server + broker), ``dlq`` (list, show and re-drive a group's dead
letters) and ``group mode`` (a group's pull/POP mode on the brokers).
``run`` and ``check`` take the same settings, all from one table
(:mod:`rmqrun.cli.settings`): flags, the YAML ``--config`` file and
``RMQRUN_*`` variables, the command line winning.

Each command is a module of its own (:data:`COMMANDS`), imported only when
it is run or listed, so ``rmqrun --version`` loads no client, broker or
supervisor code. Exit codes are :mod:`rmqrun.cli.exit_codes`; a
:class:`~rmqrun.errors.ConfigError` that reaches the group becomes one line
and its code there, not a traceback.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from rmqrun import __version__
from rmqrun.errors import ConfigError

#: command name -> "module:attribute" of its click command
COMMANDS: dict[str, str] = {
    "broker": "rmqrun.cli.broker.command:broker",
    "check": "rmqrun.cli.check.command:check",
    "demo": "rmqrun.cli.demo.command:demo",
    "dlq": "rmqrun.cli.dlq.command:dlq",
    "exporter": "rmqrun.cli.exporter.command:exporter",
    "group": "rmqrun.cli.group.command:group",
    "offsets": "rmqrun.cli.offsets.command:offsets",
    "produce": "rmqrun.cli.produce.command:produce",
    "read": "rmqrun.cli.read.command:read",
    "run": "rmqrun.cli.run.command:run",
    "spark": "rmqrun.cli.spark.command:spark",
    "status": "rmqrun.cli.status.command:status",
    "topic": "rmqrun.cli.topic.command:topic",
    "trace": "rmqrun.cli.trace.command:trace",
}


#: command name -> the first line of its help, for ``rmqrun --help`` without importing every command
#: (``tests/unit/cli/test_cli_help.py`` checks each against the command's own)
SUMMARIES: dict[str, str] = {
    "broker": "Run the embedded name server and broker until SIGINT/SIGTERM.",
    "check": "Validate the settings, import the handler and hooks, reach the name server and brokers.",
    "demo": "Start an embedded broker, produce a backlog and consume it with a worker pool.",
    "dlq": "The dead letters of a consumer group (%DLQ%<group>): list, show, re-drive.",
    "exporter": "Serve each GROUP's lag, offsets and last commit per queue from the brokers alone, for Prometheus.",
    "group": "Consumer-group settings the brokers keep: `mode` switches a group between pull and POP (RocketMQ 5.x).",
    "offsets": "Move a consumer group's offsets: the plan first, applied with --execute (kafka-consumer-groups "
               "--reset-offsets, mqadmin resetOffsetByTime).",
    "produce": "Send messages: each line of --file or of piped stdin, or --count N generated ones.",
    "read": "Print the messages of a topic.",
    "run": "Consume with a pool of worker processes running HANDLER (module:function).",
    "spark": "Run HANDLER (module:function, as for `rmqrun run`) over every message of a topic's range on Spark.",
    "status": "Per queue: broker offset, consumer offset and lag of a consumer group.",
    "topic": "Create, change, delete, list and inspect topics (like mqadmin updateTopic, topicList, topicStatus).",
    "trace": "Show a message's trace: who sent it, and each delivery to each consumer group (mqadmin "
             "queryMsgTraceById).",
}


class _Group(click.Group):
    """Commands loaded on first use (click's lazy-group pattern), and rmqrun's own errors as one line."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from :data:`SUMMARIES`: ``rmqrun --help`` imports no command module."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, SUMMARIES[name]) for name in self.list_commands(ctx)])

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, _, attr = where.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Refuse a command line holding bytes that are not UTF-8, naming the option, before anything reads it."""
        try:
            _check_utf8(args)
        except ConfigError as exc:
            from rmqrun.cli.exit_codes import fail
            fail(exc)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            from rmqrun.cli.exit_codes import fail
            fail(exc)


def _check_utf8(args: list[str]) -> None:
    """A ConfigError for the first argument holding bytes that are not UTF-8 (Python hands them over as lone
    surrogates, ``--tags $'T\\xff'`` arrives as ``'T\\udcff'``), named by its option: every value rmqrun takes
    ends up as UTF-8 text (a tag, a key, a topic, a setting), where such bytes fail much later, and unnamed."""
    for i, arg in enumerate(args):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            name, eq, value = arg.partition("=")
            if arg.startswith("-") and eq:
                where, value = name, value
            elif i > 0 and args[i - 1].startswith("-"):
                where, value = args[i - 1], arg
            else:
                where, value = f"argument {i + 1}", arg
            bad = arg[exc.start].encode("utf-8", "surrogateescape")
            raise ConfigError(f"{where} is not valid UTF-8 text: {value!r} holds the byte 0x{bad.hex()}; give "
                              "the value as UTF-8 (check the terminal's or the script's encoding)") from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120,
                                            "show_default": True})
@click.version_option(__version__, prog_name="rmqrun")
def cli() -> None:
    """rmqrun: a process-pool consumer runner for Apache RocketMQ.

    Start with `rmqrun demo`.
    """


def main() -> None:
    cli(prog_name="rmqrun")


if __name__ == "__main__":
    main()
