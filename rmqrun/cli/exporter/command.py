"""``rmqrun exporter``: each group's lag from the brokers alone, for Prometheus, whether its consumers run or not.

``rmqrun run`` exports the lag of the queues it holds, so when every consumer
of a group is down (the moment a lag alert exists for) nothing exports it.
Kafka operators run a broker-side lag exporter for this; this is the same for
RocketMQ, as a small long-running process beside the cluster:

    rmqrun exporter --namesrv ns:9876 --group OrderScoring --group Billing --metrics-port 9465

Every ``--interval`` seconds it reads each group from the brokers
(:class:`rmqrun.admin.lag_exporter.LagExporter` over
:func:`rmqrun.client.group_lag.read_group_lag`: the calls of ``mqadmin
consumerProgress``) and serves the latest reading on ``/metrics`` under the
names and labels ``rmqrun run`` uses (``rmqrun_queue_lag_messages{group,
topic,broker,queue_id}``, the two offsets, the oldest unfinished message's
age), so one alert rule covers a group whichever of the two reports it, plus
``rmqrun_queue_last_commit_timestamp_seconds`` and the exporter's own
``rmqrun_exporter_*`` series and the process collectors.

A group that cannot be read (its broker down, a refusal) has no queue series
at all until it can be read again, never the last good numbers, and
``rmqrun_exporter_up{group}`` is 0: a stale lag that looks healthy is the worst
answer during an outage. Failures are logged when they start (with the cause),
at most once a minute while they last, and when they end.

A group no broker knows (no stored offsets, no online consumer, no
subscription: a typo in ``--group``, or a group not deployed yet) reads fine
and has no queue series either, which is exactly what a lag alert cannot tell
from "nothing to report". So ``rmqrun_exporter_group_known{group}`` is 0 for
it and a warning says so when the exporter first sees it unknown (and a line
again whenever that changes); ``rmqrun_exporter_up`` stays 1, because the
cluster did answer: up 0 sends the operator after an outage that is not
there. ``rmqrun status -g`` calls the same group unknown and exits 1.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Iterator

import click
from loguru import logger
from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily

from rmqrun import __version__
from rmqrun.admin.lag_exporter import LagExporter
from rmqrun.aio import stop_on_signals, wait_event
from rmqrun.cli import logs
from rmqrun.cli.exit_codes import EXIT_OK, EXIT_RUNTIME
from rmqrun.cli.flags import check_log_level, config_option, log_level_option, namesrv_flag
from rmqrun.cli.namespace_option import namespace_option, resolve_namespace
from rmqrun.cli.run.metrics import QUEUE_LABELS, TEXT, MetricsHttpServer, add_process_collectors
from rmqrun.cli.security_options import security_for, security_options
from rmqrun.client.instance import ClientInstance
from rmqrun.namespace import unwrap


class LagCollector:
    """The exporter's families, built from the latest readings at each scrape (``Collector`` protocol)."""

    def __init__(self, exporter: LagExporter) -> None:
        self.exporter = exporter

    def collect(self) -> Iterator[Any]:
        ex = self.exporter
        info = GaugeMetricFamily("rmqrun_exporter_info", "rmqrun exporter version (always 1)", labels=["version"])
        info.add_metric([__version__], 1)
        yield info
        yield GaugeMetricFamily("rmqrun_start_time_seconds", "when this rmqrun process started, Unix time",
                                value=ex.started_at)
        up = GaugeMetricFamily("rmqrun_exporter_up", "1 when the group's latest reading succeeded; 0: no queue "
                               "series for it until one does", labels=["group"])
        read_at = GaugeMetricFamily("rmqrun_exporter_last_read_timestamp_seconds",
                                    "when the group was last read successfully, Unix time", labels=["group"])
        took = GaugeMetricFamily("rmqrun_exporter_read_seconds", "how long the group's latest successful reading "
                                 "took", labels=["group"])
        failures = CounterMetricFamily("rmqrun_exporter_read_failures_total",
                                       "readings of the group that failed (a broker or the name server silent, "
                                       "a refusal)", labels=["group"])
        known = GaugeMetricFamily("rmqrun_exporter_group_known", "1 when a broker knows the group (stored "
                                  "offsets, an online consumer or a subscription); 0: a typo or a group not "
                                  "deployed, with no lag series to alert on", labels=["group"])
        dlq = CounterMetricFamily("rmqrun_dlq_messages_total", "messages %DLQ%<group> received (its queues' max "
                                  "offsets, from the brokers): rate() is the group's dead-letter rate",
                                  labels=["group"])
        families = {name: GaugeMetricFamily(name, doc, labels=QUEUE_LABELS) for name, doc in _QUEUE_FAMILIES}
        for group, reading in ex.readings.items():
            up.add_metric([group], int(reading.ok))
            failures.add_metric([group], reading.failures)
            if reading.read_at is not None:
                read_at.add_metric([group], reading.read_at)
                took.add_metric([group], reading.read_seconds)
            if reading.ok and reading.known is not None:
                known.add_metric([group], int(reading.known))
            if reading.ok and reading.dead_lettered is not None:
                dlq.add_metric([group], reading.dead_lettered)
            for row in reading.rows:
                labels = [group, unwrap(ex.namespace, row.mq.topic), row.mq.broker_name, str(row.mq.queue_id)]
                families["rmqrun_queue_lag_messages"].add_metric(labels, row.lag)
                families["rmqrun_queue_broker_offset"].add_metric(labels, row.broker_offset)
                families["rmqrun_queue_consumer_offset"].add_metric(labels, row.consumer_offset)
                families["rmqrun_queue_last_commit_timestamp_seconds"].add_metric(labels, reading.commits[row.mq])
                if row.oldest_age_s is not None:
                    families["rmqrun_queue_oldest_unfinished_age_seconds"].add_metric(labels, row.oldest_age_s)
        yield from (up, known, read_at, took, failures, dlq)
        yield from families.values()


_QUEUE_FAMILIES = (
    ("rmqrun_queue_lag_messages", "broker max offset minus the group's committed offset"),
    ("rmqrun_queue_broker_offset", "the queue's max offset (the next offset to be written)"),
    ("rmqrun_queue_consumer_offset", "the group's committed offset on the broker"),
    ("rmqrun_queue_oldest_unfinished_age_seconds",
     "how long ago the broker stored the message at the group's offset (only while the queue lags)"),
    ("rmqrun_queue_last_commit_timestamp_seconds",
     "when the exporter saw the group's offset of the queue move, or first read it, Unix time"),
)


class ExporterServer(MetricsHttpServer):
    """``/metrics``, and ``/healthz``: 200 while the loop answers (whether the brokers do is in the metrics)."""

    paths = ("/metrics", "/healthz")

    def answer(self, path: str) -> tuple[str, bytes, str]:
        if path == "/metrics":
            return super().answer(path)
        return "200 OK", b"ok: the exporter answers; rmqrun_exporter_up says which groups it can read\n", TEXT


def registry_of(exporter: LagExporter) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LagCollector(exporter))  # type: ignore[arg-type]
    return add_process_collectors(registry)


@click.command()
@click.option("-g", "--group", "groups", multiple=True, required=True, metavar="GROUP",
              help="consumer group to export (repeatable)")
@namesrv_flag
@click.option("--metrics-port", type=click.IntRange(1, 65535), required=True, help="port of /metrics and /healthz")
@click.option("--metrics-host", default="127.0.0.1", show_default=True,
              help="address to listen on (0.0.0.0: every interface)")
@click.option("--interval", type=click.FloatRange(min=1.0), default=15.0, show_default=True,
              help="seconds between two readings of every group")
@config_option("namesrv, namespace and security settings")
@log_level_option("INFO")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@namespace_option
@security_options
def exporter(groups: tuple[str, ...], namesrv: str | None, metrics_port: int, metrics_host: str, interval: float,
             config_file: str | None, log_level: str, log_format: str, namespace: str | None,
             security_flags: dict[str, Any]) -> None:
    """Serve each GROUP's lag, offsets and last commit per queue from the brokers alone, for Prometheus.

    Exit 0 on SIGTERM/SIGINT, 1 when the port cannot be had, 2 on a bad option.
    """
    from rmqrun.cli import settings as table
    resolved = table.resolve({"namesrv": namesrv}, config_file=config_file)
    gap = table.missing(resolved, {"namesrv": "--namesrv or $NAMESRV_ADDR"})
    if gap is not None:
        raise gap
    chosen = list(dict.fromkeys(table.BY_KEY["group"].convert(g, "command line --group") for g in groups))
    namespace = resolve_namespace(namespace, config_file)
    security = security_for(security_flags, config_file)
    logs.setup(check_log_level(log_level), log_format, role="exporter", namespace=namespace)
    sys.exit(asyncio.run(_serve(resolved["namesrv"], chosen, namespace, security, metrics_host, metrics_port,
                                interval)))


async def _serve(namesrv: str, groups: list[str], namespace: str | None, security: Any, host: str, port: int,
                 interval: float) -> int:
    """Read and serve until SIGTERM/SIGINT; the exit code."""
    instance = ClientInstance(namesrv, instance_name="rmqrun-exporter", security=security)
    lag = LagExporter(instance, groups, namespace)
    server = ExporterServer(registry_of(lag), host, port)
    try:
        await server.start()
    except OSError as exc:
        logger.error("--metrics-port {}: cannot listen on {}:{}: {}", port, host, port, exc.strerror or exc)
        await instance.close()
        return EXIT_RUNTIME
    logger.info("exporting the lag of {} every {:g} s (name server {})", ", ".join(groups), interval, namesrv)
    with stop_on_signals() as stop:  # held through the close too: a second signal does not cut it short
        try:
            while not stop.is_set():
                await lag.read_all()
                await wait_event(stop, interval)
        finally:
            await server.close()
            await instance.close()
    logger.info("stopped")
    return EXIT_OK
