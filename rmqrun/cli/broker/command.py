"""``rmqrun broker``: the embedded name server and broker as a command (:mod:`rmqrun.broker.app`).

The flags are checked here, each under its own name, before the broker is
built: the broker's own checks speak in its settings' names
(``advertise_host=...``), which are not what the operator typed. What the
broker refuses afterwards (an ACL file, TLS files) is a setting too: exit 2.
The data directory and the ports are decided at start; their exit codes
(in use or a full disk: 1; a file or a read-only directory: 2) come from
:func:`rmqrun.cli.exit_codes.exit_code_for`. The defaults the flags show are
the broker's own (``BrokerConfig``'s fields and :data:`EMBEDDED_STORE`), read
from there, not written again here.
"""

from __future__ import annotations

import dataclasses
import sys

import click

from rmqrun.broker.config import EMBEDDED_STORE, BrokerConfig
from rmqrun.cli import logs
from rmqrun.cli.exit_codes import fail
from rmqrun.cli.flags import Shown, check_log_level, log_level_option
from rmqrun.errors import ConfigError
from rmqrun.event_loop import CHOICES

#: the broker's defaults by setting name (its own fields', then its store's)
_BROKER = {f.name: f.default for f in dataclasses.fields(BrokerConfig)}
_MIB = 1024 * 1024


def _check_flags(log_level: str, advertise_host: str | None, delete_when: str, event_loop: str) -> None:
    """A ConfigError naming the flag for a value the broker would refuse."""
    from rmqrun.broker.advertise import check_advertise_host
    from rmqrun.broker.store.config import delete_hours
    from rmqrun.broker.store.errors import StoreError
    from rmqrun.event_loop import loop_factory
    check_log_level(log_level)
    loop_factory(event_loop, "--event-loop")  # uvloop asked for but not installed
    if advertise_host is not None:
        try:
            check_advertise_host(advertise_host)
        except ValueError:
            raise ConfigError(f"--advertise-host {advertise_host!r} is not an IP address (e.g. 10.0.0.5)") from None
    try:
        delete_hours(delete_when)
    except StoreError:
        raise ConfigError(f"--delete-when {delete_when!r}: give hours 00-23 of the day (several: '04;16')") from None


#: store sizes and ratios: flag -> the broker setting (store/config.py has what each means)
STORE_FLAGS = {"--segment-size": "segment_size", "--max-message-size": "max_message_size",
               "--consume-queue-entries-per-file": "consume_queue_entries_per_file",
               "--disk-space-clean-forcibly-ratio": "disk_space_clean_forcibly_ratio",
               "--disk-space-warning-level-ratio": "disk_space_warning_level_ratio"}


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """``256MiB``, ``64m``, ``1048576``: bytes, or a usage error naming the flag."""
    from rmqrun.cli.values import parse_size
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _check_store(store: dict[str, object], disk_max_used_space_ratio: int) -> None:
    """The store's own checks on the sizes and ratios given, its refusal worded with the flags' names."""
    from rmqrun.broker.store.config import StoreConfig
    from rmqrun.broker.store.errors import StoreError
    given = {k: v for k, v in store.items() if v is not None}
    try:
        StoreConfig(disk_max_used_space_ratio=disk_max_used_space_ratio, **given)  # type: ignore[arg-type]
    except StoreError as exc:
        text = str(exc)
        for flag, key in STORE_FLAGS.items():
            text = text.replace(key, flag)
        raise ConfigError(text) from None


def _one_spelling(new: str | None, old: str | None, name: str, old_name: str) -> str | None:
    """The value of a flag given by its name or by its older spelling (kept hidden so scripts keep working)."""
    if new is not None and old is not None and new != old:
        raise ConfigError(f"{name} and {old_name} (its older spelling) disagree: give {name} once")
    return new if new is not None else old


@click.command()
@click.option("--data-dir", default="./rmqrun-data", show_default=True, help="where messages and state are stored")
@click.option("--host", default=_BROKER["host"], show_default=True, help="address to bind (loopback by default)")
@click.option("--namesrv-port", default=_BROKER["namesrv_port"], show_default=True, type=click.IntRange(0, 65535))
@click.option("--broker-port", default=_BROKER["port"], show_default=True, type=click.IntRange(0, 65535))
@click.option("--flush", type=click.Choice(["sync", "async"]), default=EMBEDDED_STORE.flush_mode.value,
              show_default=True,
              help="sync: SEND_OK only after fsync")
@log_level_option("INFO")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text or json (JSON lines, one object per record)")
@click.option("--advertise-host", default=None, cls=Shown,
              shown="--host if concrete, else the first non-loopback address",
              help="IP registered with the name server for clients")
@click.option("--file-reserved-hours", type=click.FloatRange(min=0, min_open=True),
              default=EMBEDDED_STORE.file_reserved_hours, show_default=True,
              help="retention: commit-log files last written longer ago are deleted")
@click.option("--delete-when", default=EMBEDDED_STORE.delete_when, show_default=True,
              help="retention: hour(s) of the day expired files are deleted ('04' or '04;16')")
@click.option("--disk-max-used-space-ratio", type=click.IntRange(10, 95),
              default=EMBEDDED_STORE.disk_max_used_space_ratio, show_default=True,
              help="retention: above this disk use (percent) expired files are deleted at once")
@click.option("--segment-size", callback=_size, default=None, cls=Shown,
              shown=f"{EMBEDDED_STORE.segment_size // _MIB}MiB", metavar="SIZE",
              help="size of one commit-log file (the broker writes one at a time; retention never deletes the one "
                   "being written): at most a quarter of the disk; fixed once a data directory has one")
@click.option("--max-message-size", callback=_size, default=None, cls=Shown,
              shown=f"{EMBEDDED_STORE.max_message_size // _MIB}MiB", metavar="SIZE",
              help="largest message accepted (body and properties); at most --segment-size")
@click.option("--consume-queue-entries-per-file", type=click.IntRange(min=1), default=None, cls=Shown,
              shown=str(EMBEDDED_STORE.consume_queue_entries_per_file),
              help="entries (20 bytes each) per consume-queue file")
@click.option("--disk-space-clean-forcibly-ratio", type=click.IntRange(10, 95), default=None, cls=Shown,
              shown=str(EMBEDDED_STORE.disk_space_clean_forcibly_ratio),
              help="retention: above this disk use (percent) even unexpired files are deleted")
@click.option("--disk-space-warning-level-ratio", type=click.IntRange(10, 95), default=None, cls=Shown,
              shown=str(EMBEDDED_STORE.disk_space_warning_level_ratio),
              help="above this disk use (percent) writes are refused until it is back at or under "
                               "--disk-space-clean-forcibly-ratio")
@click.option("--acl", "acl_file", default=None, metavar="FILE", cls=Shown, shown="none: no ACL",
              help="check every broker request against this plain_acl.yml (RocketMQ 4.x layout); "
                   "the name server stays open")
@click.option("--tls-cert-file", "tls_cert", default=None, metavar="PEM", cls=Shown, shown="none: no TLS",
              help="certificate chain: both servers speak TLS")
@click.option("--tls-key-file", "tls_key", default=None, metavar="PEM", cls=Shown, shown="none",
              help="private key of --tls-cert-file")
@click.option("--tls-cert", "old_tls_cert", default=None, hidden=True)  # the older spelling, kept for scripts
@click.option("--tls-key", "old_tls_key", default=None, hidden=True)
@click.option("--tls-mode", type=click.Choice(["permissive", "enforcing"]), default=None, cls=Shown,
              shown="permissive", help="permissive: TLS and plain clients on the same port; enforcing: TLS only")
@click.option("--order-message-enable", is_flag=True,
              help="the name server puts ordered topics' order conf (topic create --order) in their routes")
@click.option("--trace-topic-enable", is_flag=True,
              help="create the message-trace topic at start (traceTopicEnable; see docs/tracing.md)")
@click.option("--msg-trace-topic", "msg_trace_topic_name", default=_BROKER["msg_trace_topic_name"],
              show_default=True,
              help="the trace topic --trace-topic-enable creates (msgTraceTopicName)")
@click.option("--event-loop", type=click.Choice(CHOICES), default="auto", show_default=True,
              help="the broker's asyncio loop: auto is uvloop when installed (pip install 'rmqrun[uvloop]'), "
                   "else the standard one")
def broker(data_dir: str, host: str, namesrv_port: int, broker_port: int, flush: str, log_level: str,
           log_format: str, advertise_host: str | None, file_reserved_hours: float, delete_when: str,
           disk_max_used_space_ratio: int, acl_file: str | None, tls_cert: str | None, tls_key: str | None,
           old_tls_cert: str | None, old_tls_key: str | None, tls_mode: str | None,
           order_message_enable: bool, trace_topic_enable: bool, msg_trace_topic_name: str, event_loop: str,
           **store: object) -> None:
    """Run the embedded name server and broker until SIGINT/SIGTERM."""
    from rmqrun.broker.app import run as run_broker
    from rmqrun.broker.store.errors import DataDirError
    _check_flags(log_level, advertise_host, delete_when, event_loop)
    _check_store(store, disk_max_used_space_ratio)
    store = {k: v for k, v in store.items() if v is not None}
    tls_cert = _one_spelling(tls_cert, old_tls_cert, "--tls-cert-file", "--tls-cert")
    tls_key = _one_spelling(tls_key, old_tls_key, "--tls-key-file", "--tls-key")
    logs.setup(log_level.upper(), log_format, role="broker")
    try:
        code = run_broker(data_dir, host=host, namesrv_port=namesrv_port, broker_port=broker_port, flush_mode=flush,
                          advertise_host=advertise_host, file_reserved_hours=file_reserved_hours,
                          delete_when=delete_when, disk_max_used_space_ratio=disk_max_used_space_ratio,
                          acl_file=acl_file, tls_cert=tls_cert, tls_key=tls_key, tls_mode=tls_mode,
                          order_message_enable=order_message_enable, trace_topic_enable=trace_topic_enable,
                          msg_trace_topic_name=msg_trace_topic_name, ready_line=log_format != "json",
                          event_loop=event_loop, **store)
    except ValueError as exc:  # the broker refused a setting (an ACL file, TLS files): its text names it
        raise ConfigError(str(exc)) from None
    except DataDirError as exc:  # a file, not writable, in use, disk full: the directory is named
        fail(exc, f"cannot start the broker: {exc}")
    except OSError as exc:
        fail(exc, f"cannot start the broker: {exc.strerror or exc} (ports {namesrv_port}/{broker_port} on {host})")
    sys.exit(code)
