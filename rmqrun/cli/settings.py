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
silently ignored. No setting key may start with ``handler_``.

The defaults are the Java push consumer's (see ``rmqrun/consumer/defaults.py``).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from rmqrun.consumer import defaults as d
from rmqrun.consumer.allocate import STRATEGIES
from rmqrun.consumer.config import CONSUME_FROM, ConsumerConfig, default_consume_timestamp
from rmqrun.errors import ConfigError
from rmqrun.supervisor.pool import PoolConfig
from rmqrun.supervisor.supervisor import RunSettings

ENV_PREFIX = "RMQRUN_"
#: variables under this prefix belong to handlers, not to rmqrun
HANDLER_ENV_PREFIX = "RMQRUN_HANDLER_"
CONSUMER, POOL, RUN = "consumer", "pool", "run"
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
               "g": 1024**3, "gb": 1024**3, "gib": 1024**3}


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true/false")


def parse_size(value: Any) -> int:
    """Bytes from ``512MiB``, ``2g``, ``1048576``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip().lower().replace(" ", "")
    num = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(num):]
    if unit not in _SIZE_UNITS or not num:
        raise ValueError("expected a size such as 512MiB, 2GiB or a number of bytes")
    return int(float(num) * _SIZE_UNITS[unit])


def parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError("expected an integer") from None


def parse_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("expected a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError("expected a number") from None


def parse_str(value: Any) -> str:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ValueError("expected a string")
    return str(value)


def parse_tags(value: Any) -> str:
    text = parse_str(value).strip()
    return text or "*"


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
    secret: bool = False

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.key.upper()

    @property
    def field_name(self) -> str:
        return self.attr or self.key

    def convert(self, value: Any, source: str) -> Any:
        try:
            out = self.parse(value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{self.key}={value!r} ({source}) is invalid: {exc}") from None
        if self.choices is not None:
            norm = str(out).upper()
            if norm not in self.choices:
                raise ConfigError(f"{self.key}={value!r} ({source}) is invalid: one of {', '.join(self.choices)}")
            out = norm
        if self.check is not None and not self.check(out):
            raise ConfigError(f"{self.key}={value!r} ({source}) is invalid: {self.allowed}")
        return out


def _between(lo: float, hi: float) -> Callable[[Any], bool]:
    return lambda v: lo <= v <= hi


def _S(key: str, parse: Callable[[Any], Any], default: Any, help: str, target: str, **kw: Any) -> Setting:
    return Setting(key, parse, default, help, target, **kw)


SETTINGS: tuple[Setting, ...] = (
    # --- what to consume
    _S("handler", parse_str, None, "the handler, module:function", POOL),
    _S("namesrv", parse_str, None, "name server address(es), host:port[;host:port] (default $NAMESRV_ADDR)",
       CONSUMER, flag="--namesrv"),
    _S("group", parse_str, None, "consumer group", CONSUMER, flag="--group"),
    _S("topic", parse_str, None, "topic to subscribe to", CONSUMER, flag="--topic"),
    _S("tags", parse_tags, "*", "tag expression, e.g. 'TagA || TagB'", CONSUMER, flag="--tags"),
    _S("orderly", parse_bool, False, "consume each queue in order (broker-locked, one worker per queue)",
       CONSUMER, flag="--orderly"),
    _S("message_model", parse_str, d.MESSAGE_MODEL, "CLUSTERING or BROADCASTING", CONSUMER,
       flag="--message-model", choices=("CLUSTERING", "BROADCASTING")),
    _S("consume_from_where", parse_str, d.CONSUME_FROM_WHERE, "where a new group starts", CONSUMER,
       flag="--consume-from", choices=CONSUME_FROM),
    _S("consume_timestamp", parse_str, None, "start time for CONSUME_FROM_TIMESTAMP, yyyyMMddHHmmss", CONSUMER),
    _S("allocate_strategy", parse_str, d.ALLOCATE_STRATEGY, "queue allocation strategy", CONSUMER,
       flag="--allocate", choices=tuple(sorted(STRATEGIES))),
    # --- Java push consumer knobs
    _S("pull_batch_size", parse_int, d.PULL_BATCH_SIZE, "messages per pull", CONSUMER,
       check=_between(1, 1024), allowed="an integer from 1 to 1024"),
    _S("consume_message_batch_max_size", parse_int, d.CONSUME_MESSAGE_BATCH_MAX_SIZE,
       "messages per handler call (batch handlers)", CONSUMER, flag="--batch-size",
       check=_between(1, 1024), allowed="an integer from 1 to 1024"),
    _S("pull_threshold_for_queue", parse_int, d.PULL_THRESHOLD_FOR_QUEUE, "cached messages per queue", CONSUMER,
       check=_between(1, 65535), allowed="an integer from 1 to 65535"),
    _S("pull_threshold_size_for_queue", parse_int, d.PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB,
       "cached MiB per queue", CONSUMER, check=_between(1, 1024), allowed="an integer from 1 to 1024"),
    _S("pull_threshold_for_topic", parse_int, d.PULL_THRESHOLD_FOR_TOPIC, "cached messages per topic (-1: off)",
       CONSUMER, check=lambda v: v == -1 or 1 <= v <= 6553500, allowed="-1 or 1 to 6553500"),
    _S("pull_threshold_size_for_topic", parse_int, d.PULL_THRESHOLD_SIZE_FOR_TOPIC_MIB,
       "cached MiB per topic (-1: off)", CONSUMER, check=lambda v: v == -1 or 1 <= v <= 102400,
       allowed="-1 or 1 to 102400"),
    _S("pull_interval_ms", parse_int, d.PULL_INTERVAL_MS, "pause between pulls of a queue", CONSUMER,
       check=_between(0, 65535), allowed="0 to 65535"),
    _S("consume_concurrently_max_span", parse_int, d.CONSUME_CONCURRENTLY_MAX_SPAN,
       "max offset span cached per queue (concurrent)", CONSUMER, check=_between(1, 65535), allowed="1 to 65535"),
    _S("max_reconsume_times", parse_int, d.MAX_RECONSUME_TIMES,
       "retries before the DLQ (-1: 16 concurrent, unlimited orderly)", CONSUMER, flag="--max-reconsume-times",
       check=lambda v: v >= -1, allowed="-1 or more"),
    _S("suspend_current_queue_time_ms", parse_int, d.SUSPEND_CURRENT_QUEUE_TIME_MS,
       "orderly pause after a failure", CONSUMER, check=lambda v: v >= 1, allowed="1 or more"),
    _S("consume_timeout_minutes", parse_float, d.CONSUME_TIMEOUT_MINUTES,
       "handler time limit per batch, minutes (consumeTimeout)", CONSUMER, flag="--consume-timeout",
       check=lambda v: v > 0, allowed="a positive number of minutes"),
    _S("auto_commit", parse_bool, True, "orderly: commit after each success (false: handler returns Commit())",
       CONSUMER),
    _S("post_subscription_when_pull", parse_bool, d.POST_SUBSCRIPTION_WHEN_PULL,
       "send the tag expression with every pull", CONSUMER),
    _S("instance_name", parse_str, d.INSTANCE_NAME, "client instance name (DEFAULT: pid#random)", CONSUMER),
    _S("unit_name", parse_str, None, "client unit name", CONSUMER),
    _S("client_ip", parse_str, None, "the IP this client reports (default: first non-loopback IPv4)", CONSUMER),
    _S("heartbeat_interval_ms", parse_int, d.HEARTBEAT_BROKER_INTERVAL_MS, "heartbeat period", CONSUMER,
       check=lambda v: v >= 100, allowed="at least 100"),
    _S("poll_name_server_interval_ms", parse_int, d.POLL_NAME_SERVER_INTERVAL_MS, "route refresh period",
       CONSUMER, check=lambda v: v >= 100, allowed="at least 100"),
    _S("persist_offset_interval_ms", parse_int, d.PERSIST_CONSUMER_OFFSET_INTERVAL_MS, "offset commit period",
       CONSUMER, check=lambda v: v >= 100, allowed="at least 100"),
    _S("rebalance_interval_ms", parse_int, d.REBALANCE_WAIT_INTERVAL_MS, "rebalance period", CONSUMER,
       check=lambda v: v >= 100, allowed="at least 100"),
    _S("offset_store_dir", parse_str, None, "broadcasting: local offset directory (default ~/.rocketmq_offsets)",
       CONSUMER),
    # --- worker processes
    _S("workers", parse_int, None, "worker processes (default: CPU count)", POOL, flag="--workers",
       check=lambda v: v >= 1, allowed="1 or more"),
    _S("worker_init", parse_str, None, "module:function called once in each worker before messages", POOL,
       flag="--worker-init"),
    _S("worker_exit", parse_str, None, "module:function called once in each worker at exit", POOL),
    _S("max_messages_per_worker", parse_int, 0, "recycle a worker after this many messages (0: never)", POOL,
       check=lambda v: v >= 0, allowed="0 or more"),
    _S("max_memory_per_worker", parse_size, 0, "recycle a worker above this RSS, e.g. 512MiB (0: never)", POOL,
       check=lambda v: v >= 0, allowed="0 or a size"),
    _S("kill_grace", parse_float, 10.0, "seconds past the time limit before a worker is killed", POOL,
       check=lambda v: v > 0, allowed="a positive number of seconds"),
    _S("max_inflight_messages", parse_int, 64, "messages in flight per worker", RUN,
       check=lambda v: v >= 1, allowed="1 or more"),
    # --- the run
    _S("graceful_timeout", parse_float, 30.0, "seconds in-flight work may take on SIGTERM", RUN,
       attr="grace", flag="--graceful-timeout", check=lambda v: v >= 0, allowed="0 or more seconds"),
    _S("status_interval", parse_float, 10.0, "seconds between status lines (0: none)", RUN,
       check=lambda v: v >= 0, allowed="0 or more seconds"),
    _S("log_level", parse_str, "INFO", "log level", RUN, flag="--log-level",
       choices=("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")),
    _S("log_format", parse_str, "text", "text or json (JSON lines)", RUN, flag="--log-format",
       check=lambda v: v in ("text", "json"), allowed="text or json"),
    _S("metrics_port", parse_int, 0, "serve Prometheus metrics on this port (0: off)", RUN,
       flag="--metrics-port", check=_between(0, 65535), allowed="0 to 65535"),
    _S("metrics_host", parse_str, "127.0.0.1", "address the metrics endpoint binds", RUN),
)

BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}


def _unknown(key: str, where: str, shown: str | None = None) -> ConfigError:
    near = difflib.get_close_matches(key, list(BY_KEY), n=3)
    if shown is not None:
        near = [ENV_PREFIX + n.upper() for n in near]
    hint = f"; did you mean {', '.join(near)}?" if near else "; see 'rmqrun run --help-settings'"
    return ConfigError(f"unknown setting {shown or repr(key)} in {where}{hint}")


def load_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A YAML mapping of setting keys (dashes or underscores)."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read config file {p}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {p} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {p} must hold a mapping of settings, not {type(data).__name__}")
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = str(raw_key).replace("-", "_")
        if key not in BY_KEY:
            raise _unknown(str(raw_key), str(p))
        out[key] = value
    return out


def load_env(environ: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        if name.startswith(HANDLER_ENV_PREFIX):
            continue  # the handler's own configuration
        key = name[len(ENV_PREFIX):].lower()
        if key in BY_KEY:
            out[key] = value
        else:
            raise _unknown(key, "the environment", shown=name)
    return out


@dataclass
class Resolved:
    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]


def resolve(cli: Mapping[str, Any], *, config_file: str | None = None,
            environ: Mapping[str, str] | None = None) -> Resolved:
    """Merge defaults < file < environment < command line, converting and checking each value."""
    environ = os.environ if environ is None else environ
    layers = [("default", {s.key: s.default for s in SETTINGS})]
    if config_file:
        layers.append((f"file {config_file}", load_file(config_file)))
    layers.append(("environment", load_env(environ)))
    layers.append(("command line", {k: v for k, v in cli.items() if v is not None}))
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for source, layer in layers:
        for key, value in layer.items():
            if key not in BY_KEY:
                raise _unknown(key, source)
            values[key] = None if value is None else BY_KEY[key].convert(value, source)
            sources[key] = source
    if values.get("namesrv") is None and environ.get("NAMESRV_ADDR"):
        values["namesrv"] = BY_KEY["namesrv"].convert(environ["NAMESRV_ADDR"], "NAMESRV_ADDR")
        sources["namesrv"] = "environment NAMESRV_ADDR"
    return Resolved(values, sources)


def build(resolved: Resolved) -> RunSettings:
    """The engine, pool and run settings; refuses missing essentials with what to do."""
    v = resolved.values
    missing = [k for k in ("handler", "namesrv", "group", "topic") if not v.get(k)]
    if missing:
        hints = {"handler": "MODULE:FUNC", "namesrv": "--namesrv or $NAMESRV_ADDR", "group": "--group",
                 "topic": "--topic"}
        raise ConfigError("missing " + ", ".join(f"{k} ({hints[k]})" for k in missing))
    consumer_kw: dict[str, Any] = {}
    pool_kw: dict[str, Any] = {}
    run_kw: dict[str, Any] = {}
    for s in SETTINGS:
        value = v.get(s.key)
        if s.key in ("topic", "tags", "log_level", "log_format", "metrics_port", "metrics_host"):
            continue
        if value is None:
            continue
        {CONSUMER: consumer_kw, POOL: pool_kw, RUN: run_kw}[s.target][s.field_name] = value
    consumer_kw["subscriptions"] = {v["topic"]: v["tags"]}
    consumer_kw.setdefault("consume_timestamp", default_consume_timestamp())
    consumer = ConsumerConfig(**consumer_kw).validate()
    pool_kw["batch_size"] = consumer.consume_message_batch_max_size
    pool_kw["time_limit"] = consumer.consume_timeout_minutes * 60
    pool_kw["log_level"] = v["log_level"]
    pool = PoolConfig(**pool_kw)
    return RunSettings(consumer=consumer, pool=pool, **run_kw)


def describe() -> str:
    """The settings table as text (for ``rmqrun run --help-settings`` and the docs)."""
    lines = ["key / RMQRUN_ env var / flag / default / meaning"]
    for s in SETTINGS:
        default = "" if s.default is None else s.default
        allowed = f" [{', '.join(s.choices)}]" if s.choices else (f" [{s.allowed}]" if s.allowed else "")
        lines.append(f"  {s.key:<34} {s.env:<42} {s.flag or '-':<22} {default!s:<26} {s.help}{allowed}")
    return "\n".join(lines)
