"""``rmqrun check``: everything ``rmqrun run`` would verify at start-up, without consuming.

In order, stopping at the first failure (later steps need the earlier ones):

1. the settings resolve (flags, environment, ``--config``) and build; what
   connection security is on (ACL access key, TLS; never a secret), and a
   warning for a file holding a secret that other users can read;
2. the handler and the worker hooks import and have the right shape, in
   this process, with the errors a worker would give;
3. the name server answers, the topic has a route, and every broker of the
   route answers (and serves POP, when the group pops: a 4.x broker does not);
4. what it would subscribe to: topic and tags, the retry topic, the queues,
   the model, and who else consumes as the group right now.

Exit codes: 0 all well, 2 a setting is invalid or missing, 3 the handler or a
hook does not load (the worker's boot-error code), 1 the name server, the
topic or a broker is not usable.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from rmqrun.cli import settings as table
from rmqrun.cli.exit_codes import EXIT_CONFIG, EXIT_HANDLER, EXIT_OK, EXIT_RUNTIME
from rmqrun.client.instance import ClientInstance
from rmqrun.client.route import subscribe_queues
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.errors import ConfigError, RmqrunError
from rmqrun.cli.security import exposure_warnings
from rmqrun.namespace import wrap
from rmqrun.remoting.errors import AccessDeniedError, BrokerError, TopicNotExistError
from rmqrun.protocol.headers import QueryMessageRequestHeader
from rmqrun.supervisor.supervisor import RunSettings
from rmqrun.handler.loading import load_handler, load_hook

#: the name server, the topic or a broker is not usable: a runtime failure
EXIT_UNREACHABLE = EXIT_RUNTIME


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    code: int = EXIT_OK

    def ok(self, what: str, text: str) -> None:
        self.lines.append(f"ok    {what:<12} {text}")

    def fail(self, what: str, text: str, code: int) -> "Report":
        self.lines.append(f"FAIL  {what:<12} {text}")
        self.code = code
        return self

    def note(self, text: str) -> None:
        self.lines.append(text)

    def text(self) -> str:
        return "\n".join(self.lines)


def _sources(resolved: table.Resolved) -> str:
    counts: dict[str, int] = {}
    for source in resolved.sources.values():
        kind = next((k for k in ("command line", "environment", "config file") if source.startswith(k)), None)
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} from {kind}" for kind, n in sorted(counts.items())) or "all defaults"


def check_settings(cli: dict[str, object], config_file: str | None, report: Report) -> RunSettings | None:
    try:
        resolved = table.resolve(cli, config_file=config_file)
        settings = table.build(resolved)
    except ConfigError as exc:
        report.fail("settings", str(exc), EXIT_CONFIG)
        return None
    report.ok("settings", f"{len(table.SETTINGS)} settings resolved ({_sources(resolved)})")
    security = settings.consumer.security
    report.ok("security", security.describe() if security is not None else "no ACL, no TLS")
    for warning in exposure_warnings(resolved, config_file):
        report.note(f"WARN  {'security':<12} {warning}")
    return settings


def check_handler(settings: RunSettings, report: Report) -> bool:
    worker = settings.pool.worker
    try:
        handler = load_handler(worker.handler, batch_size=worker.batch_size, asyncio=worker.worker_class == "asyncio")
    except ConfigError as exc:
        report.fail("handler", str(exc), EXIT_HANDLER)
        return False
    form = "a batch handler (lists of messages)" if handler.is_batch else "one message per call"
    report.ok("handler", f"{handler.ref}: {form}")
    for what, ref in (("worker_init", worker.worker_init), ("worker_exit", worker.worker_exit)):
        if not ref:
            continue
        try:
            load_hook(ref, what, asyncio=worker.worker_class == "asyncio")
        except ConfigError as exc:
            report.fail(what, str(exc), EXIT_HANDLER)
            return False
        report.ok(what, ref)
    return True


async def check_cluster(settings: RunSettings, report: Report, timeout: float) -> None:
    consumer = settings.consumer
    instance = ClientInstance(consumer.namesrv, instance_name="rmqrun-check", api_timeout=timeout,
                              connect_timeout=timeout, security=consumer.security)
    try:
        shares: list[str] = []
        members: set[str] = set()
        ns = consumer.namespace
        wire_group = wrap(ns, consumer.group)
        for index, topic in enumerate(consumer.subscriptions):
            queues = await _check_topic(instance, consumer.namesrv, wire_group, topic, report, timeout,
                                        members, first=index == 0, namespace=ns, pop=consumer.consume_mode == "pop")
            if queues is None:
                return
            shares.append(f"{queues} queue(s) of {topic}")
        if not await _check_filters(instance, consumer, wire_group, report, timeout):
            return
        mode = consumer.mode.description
        subs = ", ".join(f"{t} [{consumer.expression_label(t, e)}]" for t, e in consumer.all_subscriptions().items())
        in_ns = f" in namespace {ns} ({wire_group} on the wire)" if ns else ""
        report.note(f"would subscribe to {subs} as group {consumer.group}{in_ns}: {consumer.message_model}, {mode}, "
                    f"allocate {consumer.allocate_strategy}, a new group starts at {consumer.consume_from_where}; "
                    f"{settings.pool.workers} worker(s) running {settings.pool.worker.handler}")
        online = f"{len(members)} member(s) of {consumer.group} online now" if members else \
            f"no member of {consumer.group} is online now"
        report.note(f"{', '.join(shares)} would be shared among the members; {online}")
    finally:
        await instance.close()


async def _check_topic(instance: ClientInstance, namesrv: str, group: str, topic: str, report: Report,
                       timeout: float, members: set[str], *, first: bool, namespace: str | None = None,
                       pop: bool = False) -> int | None:
    """One subscribed topic: its route, readable queues and brokers; the queue count, or None on failure.

    ``topic`` is the user's name; the cluster is asked for it under ``namespace``. ``pop``: the group pops
    (``consume_mode`` pop), so each broker must serve POP, as ``run`` finds out from its first assignment.
    """
    wire_topic = wrap(namespace, topic)
    in_ns = f" in namespace {namespace!r} ({wire_topic!r} on the wire)" if namespace else ""
    try:
        route = await instance.update_route(wire_topic)
    except TopicNotExistError:
        if first:
            report.ok("name server", namesrv)
        report.fail("topic", f"topic {topic!r}{in_ns} does not exist on the name server (create it with "
                             f"'rmqrun topic create {wire_topic}', or send to it once with topic auto-creation on)",
                    EXIT_UNREACHABLE)
        return None
    except (RmqrunError, OSError, asyncio.TimeoutError) as exc:
        report.fail("name server", f"{namesrv}: {exc or type(exc).__name__}", EXIT_UNREACHABLE)
        return None
    if first:
        report.ok("name server", namesrv)
    queues = sorted(subscribe_queues(route, wire_topic))
    if not queues:
        report.fail("topic", f"{topic} has no readable queue", EXIT_UNREACHABLE)
        return None
    brokers = sorted({mq.broker_name for mq in queues})
    report.ok("topic", f"{topic}: {len(queues)} readable queue(s) on {', '.join(brokers)}")
    for name in brokers:
        addr = route.master_address(name)
        if addr is None:
            report.fail("broker", f"{name} has no master in the route of {topic}", EXIT_UNREACHABLE)
            return None
        try:
            mq = next(q for q in queues if q.broker_name == name)
            backlog = await instance.broker.get_max_offset(addr, mq, timeout=timeout)
            try:
                # needs the group's permission on an ACL broker: a refusal here is what run would meet
                members.update(await instance.broker.get_consumer_list(addr, group, timeout=timeout))
            except AccessDeniedError:
                raise
            except BrokerError:
                pass  # "no consumer for this group": the broker's way of saying none is online
            await _probe_topic_access(instance, addr, wire_topic, timeout)  # the name the ACL file lists
            if pop and not await _serves_pop(instance, addr, wire_topic, group, timeout):
                report.fail("consume mode", f"consume_mode=pop: broker {name} at {addr} does not serve POP (it "
                                            "has no QUERY_ASSIGNMENT): POP needs RocketMQ 5.x; use --consume-mode "
                                            "pull with this cluster", EXIT_CONFIG)  # run's exit code for it
                return None
        except AccessDeniedError as exc:
            report.fail("access", str(exc), EXIT_UNREACHABLE)
            return None
        except (RmqrunError, OSError, asyncio.TimeoutError) as exc:
            report.fail("broker", f"{name} at {addr}: {exc or type(exc).__name__}", EXIT_UNREACHABLE)
            return None
        report.ok("broker", f"{name} at {addr} answers (queue {mq.queue_id} holds offsets up to {backlog})")
    return len(queues)


async def _check_filters(instance: ClientInstance, consumer: ConsumerConfig, group: str, report: Report,
                         timeout: float) -> bool:
    """The subscriptions that are not tag expressions (``sql``), checked with their topics' brokers as ``run``
    checks them before its first heartbeat (:func:`check_filters`); False when one refuses."""
    from rmqrun.consumer.filter_check import check_filters
    subs = consumer.on_wire().subscription_data()
    if all(sub.is_tag_type for sub in subs.values()):
        return True
    try:
        asked = await check_filters(instance, group, subs, consumer.namespace, timeout)
    except ConfigError as exc:
        report.fail("filter", str(exc), EXIT_CONFIG)  # run's exit code for it
        return False
    except AccessDeniedError as exc:
        report.fail("access", str(exc), EXIT_UNREACHABLE)
        return False
    except (RmqrunError, OSError, asyncio.TimeoutError) as exc:
        report.fail("filter", f"the brokers could not say whether they serve the SQL92 selector: "
                              f"{exc or type(exc).__name__}", EXIT_UNREACHABLE)
        return False
    report.ok("filter", f"SQL92 selector accepted by {asked} broker(s)")
    return True


async def _serves_pop(instance: ClientInstance, addr: str, topic: str, group: str, timeout: float) -> bool:
    """Whether the broker knows QUERY_ASSIGNMENT, the POP consumer's first request (a 4.x broker refuses it,
    and ``run`` stops on that). The question changes nothing on the broker. An ACL refusal is raised; any
    other failure is not this check's to report (``run`` retries it)."""
    from rmqrun.client.assignment import AssignmentClient
    from rmqrun.consumer.broker_mode import not_supported
    try:
        await AssignmentClient(instance.pool).query_assignment(addr, topic, group, instance.client_id,
                                                               timeout=timeout)
    except AccessDeniedError:
        raise
    except (RmqrunError, OSError, asyncio.TimeoutError) as exc:
        return not not_supported(exc)
    return True


async def _probe_topic_access(instance: ClientInstance, addr: str, topic: str, timeout: float) -> None:
    """Whether the account may read ``topic`` (SUB), without side effects: a QUERY_MESSAGE for a key no
    message has is checked for the topic's SUB permission by an ACL broker and changes nothing. Only
    an ACL refusal matters here (raised by the pool); any other answer means the ACL let it through."""
    if instance.security is None or not instance.security.signs:
        return
    probe = QueryMessageRequestHeader(topic=topic, key="rmqrun-check-access-probe", max_num=1,
                                      begin_timestamp=0, end_timestamp=0)
    try:
        await instance.broker.query_message(addr, probe, unique_key=False, timeout=timeout)
    except AccessDeniedError:
        raise
    except (RmqrunError, OSError, asyncio.TimeoutError):
        pass  # not an ACL refusal: the other checks report the broker's health


def run_check(cli: dict[str, object], config_file: str | None, timeout: float = 5.0) -> Report:
    report = Report()
    settings = check_settings(cli, config_file, report)
    if settings is None or not check_handler(settings, report):
        return report
    asyncio.run(check_cluster(settings, report, timeout))
    return report
