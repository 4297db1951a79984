"""One declarative table of ``rmqrun run`` settings, behind the CLI, YAML and environment.

Each :class:`Setting` names its key (the YAML key), its command-line flag
(if it has one), its ``RMQRUN_<KEY>`` environment variable, its type,
default, check and help text, and where it goes (consumer engine, worker
pool, or the run itself). Precedence: command line > environment > config
file > default. Unknown YAML keys and unknown ``RMQRUN_*`` variables are
refused, naming the key and listing close matches; invalid values are refused
naming the key, the value and what is allowed.

The environment rule is one line: ``RMQRUN_<KEY>`` sets a setting, and the
prefix ``RMQRUN_HANDLER_`` is reserved for handlers' own variables (the
examples in ``workers/`` read ``RMQRUN_HANDLER_CPU_MS`` and the like); rmqrun
never reads those and passes them through to the workers untouched. Any other
``RMQRUN_*`` name is a typo and refused, so ``RMQRUN_WROKERS=8`` cannot be
silently ignored. No setting key may start with ``handler_``. ``NAMESRV_ADDR``
(the Java client's variable) is read for ``namesrv``, below ``RMQRUN_NAMESRV``.

The defaults are the Java push consumer's (see ``rmqrun/consumer/defaults.py``).

Each default and each check is written once. A setting that lands in a dataclass (``ConsumerConfig``,
``WorkerConfig``, ``PoolConfig``, ``RunSettings``) takes both from that class's field
(:mod:`rmqrun.setting_rules`): the classes are built directly by programs and tests, and sit below this
module, so they hold the values and the table reads them; a row that writes a default or a check of its own
is refused when the table loads. Only the command line's own settings (topics, metrics, security, the event
loop) carry theirs here. Adding a worker setting is one ``WorkerConfig`` field and one row.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

import yaml

from rmqrun.cli.values import (
    parse_bool, parse_float, parse_group, parse_int, parse_lower, parse_name,
    parse_namespace, parse_namesrv, parse_ref, parse_size, parse_sql, parse_str, parse_subscriptions, parse_tags,
    parse_timestamp,
)
from rmqrun.cli.subscription_settings import split_topic_flags, sql_topics, subscriptions_of
from rmqrun.client.failure_log import DEFAULT_REPORT_EVERY_S
from rmqrun.consumer.allocate import STRATEGIES
from rmqrun.consumer.allocate_nearby import NAME as NEARBY
from rmqrun.consumer.config import ConsumerConfig, default_consume_timestamp
from rmqrun.errors import ConfigError
from rmqrun.event_loop import CHOICES
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.setting_rules import between, positive, rule_of
# the settings dataclasses only (their defaults and checks): `run --help` loads none of the supervisor's machinery
from rmqrun.supervisor.pool_config import PoolConfig, worker_config_for
from rmqrun.supervisor.run_settings import RunSettings

if TYPE_CHECKING:  # imported when settings are built
    from rmqrun.remoting.security import ClientSecurity

ENV_PREFIX = "RMQRUN_"
#: variables under this prefix belong to handlers, not to rmqrun
HANDLER_ENV_PREFIX = "RMQRUN_HANDLER_"
#: where a setting goes: the consumer engine, each worker, the worker pool, the supervisor's run, or the CLI itself
CONSUMER, WORKER, POOL, RUN, CLI = "consumer", "worker", "pool", "run", "cli"
#: the connection security (ACL credentials, TLS): one ClientSecurity, see rmqrun/cli/security.py
SECURITY = "security"
#: the dataclass a target's settings are fields of: each such setting's default and check are written there
FIELDS_OF: dict[str, type] = {CONSUMER: ConsumerConfig, WORKER: WorkerConfig, POOL: PoolConfig, RUN: RunSettings}


@dataclass(frozen=True)
class Setting:
    key: str
    parse: Callable[[Any], Any]
    default: Any
    help: str
    target: str
    #: the field it sets in its target (defaults to ``key``)
    attr: str | None = None
    flag: str | None = None
    choices: tuple[str, ...] | None = None
    check: Callable[[Any], bool] | None = None
    allowed: str = ""
    #: the flag may be repeated (``--topic A --topic B``)
    multiple: bool = False
    #: a secret: its value is never shown (errors, --print-settings, check) and never reaches workers
    secret: bool = False

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.key.upper()

    @property
    def field_name(self) -> str:
        return self.attr or self.key

    @property
    def is_flag(self) -> bool:
        """A boolean: its command-line flag takes no value."""
        return self.parse is parse_bool

    def convert(self, value: Any, source: str) -> Any:
        """The typed value, or a ConfigError naming the key, the value, its source and what is allowed."""
        shown = "(hidden)" if self.secret else repr(value)
        try:
            out = self.parse(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{self.key}={shown} ({source}) is invalid: {exc}") from None
        if self.choices is not None:
            norm = str(out).upper()
            if norm not in self.choices:
                raise ConfigError(f"{self.key}={shown} ({source}) is invalid: one of {', '.join(self.choices)}")
            out = norm
        if self.check is not None and not self.check(out):
            raise ConfigError(f"{self.key}={shown} ({source}) is invalid: {self.allowed}")
        return out


def _S(key: str, parse: Callable[[Any], Any], help: str, target: str, **kw: Any) -> Setting:
    """A row. A setting of a dataclass (:data:`FIELDS_OF`) takes its default and its check from the field
    (None for a required field or one computed when built); giving either here is refused (written twice)."""
    cls = FIELDS_OF.get(target)
    if cls is None:
        return Setting(key, parse, kw.pop("default", None), help, target, **kw)
    name = kw.get("attr") or key
    given = sorted({"default", "check", "allowed"} & kw.keys())
    if given:
        raise TypeError(f"setting {key!r} gives its {', '.join(given)} again: they are written on "
                        f"{cls.__name__}.{name}")
    found = {f.name: f for f in dataclasses.fields(cls)}.get(name)
    if found is None:
        raise TypeError(f"setting {key!r}: {cls.__name__} has no field {name!r}")
    default = None if found.default is dataclasses.MISSING else found.default
    rule = rule_of(found)
    if rule is not None and rule.choices is not None:
        if "choices" in kw:
            raise TypeError(f"setting {key!r} gives its choices again: they are {cls.__name__}.{name}'s rule")
        kw["choices"] = rule.choices
    elif rule is not None:
        kw.update(check=rule.ok, allowed=rule.allowed)
    return Setting(key, parse, default, help, target, **kw)


SETTINGS: tuple[Setting, ...] = (
    # --- what to consume
    _S("handler", parse_ref, "the handler, module:function", WORKER),
    _S("namesrv", parse_namesrv, "name server address(es), host:port[;host:port] (default $NAMESRV_ADDR)", CONSUMER,
       flag="--namesrv"),
    _S("group", parse_group, "consumer group", CONSUMER, flag="--group"),
    _S("namespace", parse_namespace, "instance namespace of a managed cluster: topics and the group are "
       "'NAMESPACE%name' on the wire, handlers, metrics and output show the plain names", CONSUMER,
       flag="--namespace"),
    _S("topic", parse_name, "topic to subscribe to; on the command line repeatable, each TOPIC or "
       "TOPIC:TAGS, e.g. --topic Orders:'TagA || TagB' --topic Audit", CLI, default=None, flag="--topic",
       multiple=True),
    _S("subscriptions", parse_subscriptions, "several topics, each with its tag expression "
       "(instead of topic/tags), e.g. {Orders: 'TagA || TagB', Audit: '*'}", CLI, default=None),
    _S("tags", parse_tags, "tag expression, e.g. 'TagA || TagB'", CLI, default="*", flag="--tags"),
    _S("sql", parse_sql, "SQL92 selector on the message properties, instead of tags, e.g. \"region = 'eu' AND "
       "amount > 100\" (Java's MessageSelector.bySql; a Java broker needs enablePropertyFilter=true)", CLI,
       default=None, flag="--sql"),
    _S("orderly", parse_bool, "consume each queue in order (broker-locked, one worker per queue)", CONSUMER,
       flag="--orderly"),
    _S("order_by", parse_lower, "orderly unit: queue (one job per queue, Java's) or key (in order per "
       "message key, parallel across keys; implies orderly)", CONSUMER, flag="--order-by"),
    _S("order_key", parse_str, "order_by key: where the key comes from: sharding_key "
       "(__SHARDINGKEY, else the first of keys), keys, tags or property:NAME", CONSUMER, flag="--order-key"),
    _S("message_model", parse_str, "CLUSTERING or BROADCASTING", CONSUMER, flag="--message-model"),
    _S("consume_from_where", parse_str, "where a new group starts", CONSUMER, flag="--consume-from"),
    _S("consume_timestamp", parse_timestamp, "start time for CONSUME_FROM_TIMESTAMP, yyyyMMddHHmmss "
       "(default: half an hour ago)", CONSUMER),
    _S("allocate_strategy", parse_str, "queue allocation strategy", CONSUMER, flag="--allocate",
       choices=tuple(sorted((*STRATEGIES, NEARBY)))),
    _S("allocate_queues", parse_str, "CONFIG: the queues this instance consumes, TOPIC@BROKER:QUEUE_ID,...",
       CONSUMER),
    _S("allocate_idcs", parse_str, "MACHINE_ROOM: the rooms whose brokers (named IDC@NAME) the group "
       "consumes, idc1,idc2", CONSUMER),
    _S("machine_room", parse_str, "MACHINE_ROOM_NEARBY: the machine room this instance runs in (written "
       "in front of its instance name, room-<name>, so the group can tell)", CONSUMER, flag="--machine-room"),
    _S("nearby_allocate_strategy", parse_str, "MACHINE_ROOM_NEARBY: the strategy applied within each machine room",
       CONSUMER, choices=tuple(sorted(STRATEGIES))),
    _S("broker_machine_rooms", parse_str, "MACHINE_ROOM_NEARBY: a broker's room from its "
       "name: prefix:SEP (up to SEP), regex:PATTERN (group 1) or table:NAME=ROOM,...", CONSUMER),
    _S("consumer_machine_rooms", parse_str, "MACHINE_ROOM_NEARBY: a consumer's room "
       "from its client id (ip@instance): instance-prefix:SEP, prefix:SEP, regex:PATTERN or table:ID=ROOM,...",
       CONSUMER),
    _S("consume_mode", parse_lower, "pull (each queue to one client of the group), pop "
       "(RocketMQ 5.x: the broker hands any queue's messages to any client; more instances than queues) or auto "
       "(pull or pop per topic as the broker's mode table says, switching live; pull on 4.x)", CONSUMER,
       flag="--consume-mode"),
    _S("pop_invisible_time_ms", parse_int, "pop: a popped message stays invisible "
       "this long unless acked; a longer handler call is extended before it lapses", CONSUMER),
    _S("pop_poll_time_ms", parse_int, "pop: how long the broker holds a pop with nothing to return (long polling)",
       CONSUMER),
    _S("pop_batch_size", parse_int, "pop: messages per pop request", CONSUMER),
    _S("pop_threshold_for_queue", parse_int, "pop: un-acked messages per queue before popping pauses "
       "(flow control; for an assignment of every queue, per queue it covers once handler calls are quick)",
       CONSUMER),
    # --- Java push consumer knobs
    _S("pull_batch_size", parse_int, "messages per pull", CONSUMER),
    _S("consume_message_batch_max_size", parse_int, "messages per handler call (batch handlers)", CONSUMER,
       flag="--batch-size"),
    _S("pull_threshold_for_queue", parse_int, "cached messages per queue", CONSUMER),
    _S("pull_threshold_size_for_queue", parse_int, "cached MiB per queue", CONSUMER),
    _S("pull_threshold_for_topic", parse_int, "cached messages per topic (-1: off)", CONSUMER),
    _S("pull_threshold_size_for_topic", parse_int, "cached MiB per topic (-1: off)", CONSUMER),
    _S("pull_interval_ms", parse_int, "pause between pulls of a queue", CONSUMER),
    _S("consume_concurrently_max_span", parse_int, "max offset span cached per queue (concurrent)", CONSUMER),
    _S("max_reconsume_times", parse_int, "retries before the DLQ (-1: 16 concurrent, unlimited orderly)", CONSUMER,
       flag="--max-reconsume-times"),
    _S("suspend_current_queue_time_ms", parse_int, "orderly pause after a failure", CONSUMER),
    _S("consume_timeout_minutes", parse_float, "handler time limit per call, minutes (consumeTimeout)", CONSUMER,
       flag="--consume-timeout"),
    _S("auto_commit", parse_bool, "orderly: commit after each success (false: handler returns Commit())", CONSUMER),
    _S("post_subscription_when_pull", parse_bool, "send the tag expression with every pull", CONSUMER),
    _S("instance_name", parse_str, "client instance name (DEFAULT: pid#random)", CONSUMER),
    _S("unit_name", parse_str, "client unit name", CONSUMER),
    _S("client_ip", parse_str, "the IP this client reports (default: first non-loopback IPv4)", CONSUMER),
    _S("heartbeat_interval_ms", parse_int, "heartbeat period", CONSUMER),
    _S("poll_name_server_interval_ms", parse_int, "route refresh period", CONSUMER),
    _S("persist_offset_interval_ms", parse_int, "offset commit period", CONSUMER),
    _S("rebalance_interval_ms", parse_int, "rebalance period", CONSUMER),
    _S("offset_store_dir", parse_str, "broadcasting: local offset directory (default ~/.rocketmq_offsets)", CONSUMER),
    _S("otel", parse_bool, "OpenTelemetry: a process span per handler call, child of the producer's "
       "W3C traceparent; exporters from OTEL_* variables (needs rmqrun[otel]; docs/tracing.md)", WORKER,
       flag="--otel"),
    _S("msg_trace", parse_bool, "write RocketMQ message traces of consumption (SubBefore/SubAfter per "
       "message, as Java's enableMsgTrace) for mqadmin queryMsgTraceById and the Dashboard", CONSUMER,
       flag="--msg-trace"),
    _S("msg_trace_topic", parse_name, "the topic message traces go to (customizedTraceTopic)", CONSUMER,
       flag="--msg-trace-topic"),
    # --- worker processes
    _S("workers", parse_int, "worker processes (default: CPU count)", POOL, flag="--workers"),
    _S("worker_class", parse_lower, "how a worker runs handler calls: process (one call at a time: CPU-bound "
       "handlers), threads (up to worker_concurrency plain-def calls at once in a thread pool: blocking I/O) or "
       "asyncio (up to worker_concurrency async-def calls at once on an event loop)", WORKER,
       flag="--worker-class"),
    _S("worker_concurrency", parse_int, "handler calls at once in each worker (threads and asyncio; process runs "
       "one)", WORKER, attr="concurrency", flag="--worker-concurrency"),
    _S("worker_init", parse_ref, "module:function called once in each worker before messages", WORKER,
       flag="--worker-init"),
    _S("worker_exit", parse_ref, "module:function called once in each worker at exit", WORKER),
    _S("max_messages_per_worker", parse_int, "recycle a worker after this many messages (0: never)", WORKER,
       attr="max_messages", flag="--max-messages-per-worker"),
    _S("max_messages_jitter", parse_int, "a random 0..N added to max_messages_per_worker per worker, so "
       "workers do not all recycle at once (default: 10% of it)", WORKER, flag="--max-messages-jitter"),
    _S("max_memory_per_worker", parse_size, "recycle a worker above this RSS, e.g. 512MiB (0: never)", WORKER,
       attr="max_memory", flag="--max-memory-per-worker"),
    _S("long_call_seconds", parse_float, "a handler call running this long (or 10 x the usual time per "
       "message, if longer) is logged, and the work queued behind it on its worker goes to other workers (0: off)",
       POOL),
    _S("worker_liveness_timeout", parse_float, "a worker that holds work and shows no sign of life "
       "(picks up no batch, makes no progress, outside a handler call or stopped) for this long is stuck: "
       "logged, the batches it has not begun go to other workers, not ready when no worker can take work (0: off)",
       POOL),
    _S("stuck_worker_kill_after", parse_float, "a worker still stuck (worker_liveness_timeout) this "
       "many seconds later is killed with SIGKILL and replaced; what it had not finished runs again (0: never)",
       POOL),
    _S("max_log_record", parse_size, "longest log record a handler may write, in characters, e.g. "
       "64KiB; the rest is cut with a marker saying how much (0: no cap)", WORKER),
    _S("kill_grace", parse_float, "seconds past the time limit before a worker is killed", WORKER),
    _S("crash_limit", parse_int, "worker deaths no message explains (at boot, or outside a handler call) "
       "tolerated within crash_window; one more stops rmqrun (default: max(10, 2 x workers))", POOL),
    _S("crash_window", parse_float, "seconds over which crash_limit counts deaths", POOL),
    _S("max_inflight_messages", parse_int, "messages in flight per worker", RUN),
    # --- the run
    _S("graceful_timeout", parse_float, "seconds in-flight work may take on SIGTERM", RUN, attr="grace",
       flag="--graceful-timeout"),
    _S("status_interval", parse_float, "seconds between status lines (0: none)", RUN),
    _S("ready_broker_timeout", parse_float, "not ready (/readyz 503, rmqrun_ready 0) "
       "when no broker has answered for this many seconds; lag from a broker this quiet is not shown", RUN),
    _S("stall_timeout", parse_float, "unhealthy (/healthz 503, no watchdog pings) when work "
       "waits and no handler call has finished for this many seconds; above the longest normal call (0: off)", RUN),
    _S("watchdog_checks_health", parse_bool, "systemd watchdog pings stop while unhealthy (a wedged "
       "pool), so systemd restarts rmqrun (false: they prove only that the event loop turns)", RUN),
    _S("log_repeat_interval", parse_float, "a failure that repeats (broker or name "
       "server unreachable, a periodic task failing) is logged when it starts and ends, with a summary at "
       "most every this many seconds", CLI, default=DEFAULT_REPORT_EVERY_S, check=positive,
       allowed="a positive number of seconds"),
    _S("log_level", parse_str, "log level", WORKER, flag="--log-level"),
    _S("log_format", parse_lower, "text or json (JSON lines, one object per record)", WORKER, flag="--log-format"),
    _S("metrics_port", parse_int, "serve Prometheus metrics on this port (0: off)", CLI, default=0,
       flag="--metrics-port", check=between(0, 65535), allowed="0 to 65535"),
    _S("metrics_host", parse_str, "address the metrics endpoint binds", CLI, default="127.0.0.1",
       flag="--metrics-host"),
    # --- secure clusters (ACL 1.0 signatures, TLS): every connection of every command
    _S("access_key", parse_str, "ACL access key: every request is signed (needs secret_key or secret_key_file)",
       SECURITY, default=None, flag="--access-key"),
    _S("secret_key", parse_str, "ACL secret key (YAML or RMQRUN_SECRET_KEY only: a flag would show it in "
       "ps; never logged or shown)", SECURITY, default=None, secret=True),
    _S("secret_key_file", parse_str, "file holding the ACL secret key (its first line)", SECURITY, default=None,
       flag="--secret-key-file"),
    _S("security_token", parse_str, "ACL security token (STS), sent and signed with every request "
       "(YAML or RMQRUN_SECURITY_TOKEN only)", SECURITY, default=None, secret=True),
    _S("tls", parse_bool, "connect to name servers and brokers with TLS", SECURITY, default=False, flag="--tls"),
    _S("tls_ca_file", parse_str, "CA bundle (PEM) the servers' certificates are verified against "
       "(default: the system's)", SECURITY, default=None, flag="--tls-ca-file"),
    _S("tls_cert_file", parse_str, "client certificate (PEM), for servers that ask for one", SECURITY, default=None,
       flag="--tls-cert-file"),
    _S("tls_key_file", parse_str, "the client certificate's private key (PEM; default: in tls_cert_file)", SECURITY,
       default=None, flag="--tls-key-file"),
    _S("tls_insecure", parse_bool, "do not verify the servers' certificates (test clusters only)", SECURITY,
       default=False, flag="--tls-insecure"),
    _S("event_loop", parse_lower, "the supervisor's asyncio loop: uvloop if installed (auto), uvloop, asyncio", CLI,
       default="auto", flag="--event-loop", check=lambda v: v in CHOICES,
       allowed="auto, uvloop or asyncio"),
)

BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}
#: what ``rmqrun run`` cannot start without, and how to give it
ESSENTIALS = {"handler": "MODULE:FUNCTION", "namesrv": "--namesrv or $NAMESRV_ADDR", "group": "--group",
              "topic": "--topic"}


def security_of(resolved: Resolved) -> "ClientSecurity | None":
    """The one connection-security value of these settings (None: no ACL, no TLS)."""
    from rmqrun.cli.security import client_security
    return client_security(resolved)


def _unknown(key: str, where: str, *, env_name: str | None = None) -> ConfigError:
    near = difflib.get_close_matches(key, list(BY_KEY), n=3)
    if env_name is not None:
        near = [ENV_PREFIX + n.upper() for n in near]
        what = env_name
        hint = (f"; did you mean {', '.join(near)}?" if near else
                f"; settings are {ENV_PREFIX}<KEY> (see 'rmqrun run --help-settings')")
        hint += f" (a handler's own variables must start with {HANDLER_ENV_PREFIX})"
    else:
        what = repr(key)
        hint = f"; did you mean {', '.join(near)}?" if near else "; see 'rmqrun run --help-settings'"
    return ConfigError(f"unknown setting {what} in {where}{hint}")


def load_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A YAML mapping of setting keys (dashes or underscores) to scalar values."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {p} is not UTF-8 text: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {p} is not valid YAML: {_yaml_problem(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} must hold a mapping of settings (key: value), "
                          f"not a {type(data).__name__}")
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for raw_key, value in data.items():
        if not isinstance(raw_key, str):
            raise ConfigError(f"config file {p}: setting names must be strings, got {raw_key!r}")
        key = raw_key.replace("-", "_")
        if key not in BY_KEY:
            raise _unknown(raw_key, f"config file {p}")
        if key in spelled:
            raise ConfigError(f"config file {p} sets {key!r} twice (as {spelled[key]!r} and {raw_key!r})")
        spelled[key] = raw_key
        out[key] = value
    return out


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong and where, without the quoted line: it may be the one holding secret_key."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or problem is None:
        return type(exc).__name__
    context = getattr(exc, "context", None)
    return f"{context + ', ' if context else ''}{problem} (line {mark.line + 1}, column {mark.column + 1})"


def load_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``RMQRUN_<KEY>`` variables; ``RMQRUN_HANDLER_*`` are skipped, any other ``RMQRUN_*`` refused."""
    out: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name.startswith(HANDLER_ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX):].lower()
        if key not in BY_KEY or name != BY_KEY[key].env:
            raise _unknown(key, "the environment", env_name=name)
        out[key] = value
    return out


@dataclass
class Resolved:
    """Every setting's value and where it came from (``default``, a file, a variable, a flag)."""

    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def resolve(cli: Mapping[str, Any], *, config_file: str | os.PathLike[str] | None = None,
            environ: Mapping[str, str] | None = None) -> Resolved:
    """Merge defaults < file < environment < command line, converting and checking each value.

    ``cli`` maps keys to what the flags gave (None: not given). A ``null`` in
    the file means "the default".
    """
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {s.key: s.default for s in SETTINGS}
    sources: dict[str, str] = {s.key: "default" for s in SETTINGS}

    def apply(layer: Mapping[str, Any], source_of: Callable[[Setting], str]) -> None:
        for key, value in layer.items():
            setting = BY_KEY.get(key)
            if setting is None:
                raise _unknown(key, "the command line")
            if value is None:
                continue
            values[key] = setting.convert(value, source_of(setting))
            sources[key] = source_of(setting)

    cli = split_topic_flags(cli)
    if config_file:
        apply(load_file(config_file), lambda s: f"config file {config_file}")
    env_layer = load_env(environ)
    if "namesrv" not in env_layer and environ.get("NAMESRV_ADDR"):
        values["namesrv"] = BY_KEY["namesrv"].convert(environ["NAMESRV_ADDR"], "environment NAMESRV_ADDR")
        sources["namesrv"] = "environment NAMESRV_ADDR"
    apply(env_layer, lambda s: f"environment {s.env}")
    apply(cli, lambda s: f"command line {s.flag}" if s.flag else "command line")
    return Resolved(values, sources)


def missing(resolved: Resolved, keys: Mapping[str, str] = ESSENTIALS) -> ConfigError | None:
    """An error naming every essential setting left unset, with how to set it; None if all are set."""
    gaps = [k for k in keys if not resolved.values.get(k)
            and not (k == "topic" and resolved.values.get("subscriptions"))]
    if not gaps:
        return None
    return ConfigError("missing " + ", ".join(f"{k} ({keys[k]})" for k in gaps))


def build(resolved: Resolved) -> RunSettings:
    """The engine, worker, pool and run settings, each value set once where it is built; refuses missing
    essentials with what to do. The workers take four values of the consumer's: the batch size, the time limit
    (consumeTimeout, in seconds), the namespace they take off topics and the group their spans name."""
    gap = missing(resolved)
    if gap is not None:
        raise gap
    v = resolved.values
    kw: dict[str, dict[str, Any]] = {target: {} for target in FIELDS_OF}
    for s in SETTINGS:
        if s.target in FIELDS_OF and v.get(s.key) is not None:
            kw[s.target][s.field_name] = v[s.key]
    consumer_kw = kw[CONSUMER]
    consumer_kw["subscriptions"] = subscriptions_of(resolved)
    consumer_kw["expression_types"] = sql_topics(resolved)
    consumer_kw["security"] = security_of(resolved)
    consumer_kw.setdefault("consume_timestamp", default_consume_timestamp())
    consumer = ConsumerConfig(**consumer_kw).validate()
    worker = worker_config_for(consumer, **kw[WORKER])
    return RunSettings(consumer=consumer, pool=PoolConfig(worker, **kw[POOL]), **kw[RUN])


def describe(resolved: Resolved | None = None, width: int = 100) -> str:
    """The settings table as text (``rmqrun run --help-settings``); with values and sources when resolved.

    Unresolved, each setting is a block that fits ``width`` columns (a row per setting was 230 wide): the key
    with its flag and variable, then what it means, its default and what it allows, wrapped and indented."""
    import textwrap

    from rmqrun.cli.setting_help import SHORT, help_of
    lines = ["Every setting is a YAML key (--config FILE), an environment variable and, for the common ones,",
             "a flag. Precedence: command line > environment > config file > default.",
             f"Variables starting with {HANDLER_ENV_PREFIX} are left to handlers; other unknown {ENV_PREFIX}*",
             "variables are refused.", ""]
    if resolved is None:
        for s in SETTINGS:
            lines.append(f"  {s.key}  ({', '.join(x for x in (SHORT.get(s.key), s.flag, s.env) if x)})")
            meaning, default = help_of(s, needed=s.key in ESSENTIALS)
            allowed = f" Allowed: {', '.join(s.choices)}." if s.choices else (
                f" Allowed: {s.allowed}." if s.allowed else "")
            lines += textwrap.wrap(f"{meaning}. Default: {default}.{allowed}", width, initial_indent="      ",
                                   subsequent_indent="      ", break_on_hyphens=False)
        return "\n".join(lines)
    lines.append(f"  {'key':<32} {'value':<30} source")
    for s in SETTINGS:
        value = resolved.values.get(s.key)
        if s.secret and value is not None:
            value = "(set, hidden)"
        lines.append(f"  {s.key:<32} {'' if value is None else str(value):<30} {resolved.sources[s.key]}")
    return "\n".join(lines)


def markdown() -> str:
    """The settings table as the Markdown page ``docs/configuration.md`` (``scripts/gen_config_reference.py``)."""
    def cell(text: object) -> str:
        return str(text).replace("|", "\\|")

    lines = ["# Configuration reference: `rmqrun run`", "",
             "Generated from the settings table (`rmqrun/cli/settings.py`) by `python scripts/gen_config_reference.py`;",
             "`tests/unit/cli/test_config_reference.py` fails when this page and the table disagree.", "",
             "Every setting is a YAML key (`--config FILE`), an environment variable and, for the common ones, a flag.",
             "Precedence: command line > environment > config file > default. `NAMESRV_ADDR` (the Java client's",
             f"variable) is read for `namesrv`, below `{ENV_PREFIX}NAMESRV` and above the config file. Variables starting",
             f"with `{HANDLER_ENV_PREFIX}` are left to handlers; any other unknown `{ENV_PREFIX}*` variable, and any",
             "unknown YAML key, is refused with the closest valid name. `rmqrun run --print-settings` shows each",
             "resolved value and where it came from.", "",
             "| key | environment variable | flag | default | meaning |", "|---|---|---|---|---|"]
    for st in SETTINGS:
        default = "" if st.default is None else f"`{st.default}`"
        allowed = f" ({', '.join(st.choices)})" if st.choices else (f" ({st.allowed})" if st.allowed else "")
        flag = f"`{st.flag}`" if st.flag else ""
        lines.append(f"| `{st.key}` | `{st.env}` | {flag} | {cell(default)} | {cell(st.help + allowed)} |")
    return "\n".join(lines) + "\n"

