"""Settings of the embedded name server and broker, in one validated dataclass.

Defaults are RocketMQ 4.9.8's (``BrokerConfig``, ``MessageStoreConfig``,
``NamesrvConfig``) wherever the real broker has one, because the point of the
embedded broker is to answer exactly like a real one; each field says where
it differs and why. Addresses are loopback by default: the embedded broker is
for tests, demos and single-host jobs, and nothing should be exposed unless
asked for.

The message store's settings (sizes, flushing, delay levels, retention) are one
:class:`StoreConfig`, held as ``store`` and handed to the store as it is; their
defaults and checks are written there. The broker differs from the store's
defaults in one thing, said once in :data:`EMBEDDED_STORE`: SYNC flushing.
Under their Java names the store's settings read as the broker's own
(``getBrokerConfig``, ``updateBrokerConfig``, ``make_config``'s keywords): see
:func:`settings_of`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rmqrun.broker.acl.config import load_acl_file
from rmqrun.broker.advertise import check_advertise_host, default_advertise_host
from rmqrun.broker.store.config import STORE_ONLY, FlushMode, StoreConfig, parse_delay_levels
from rmqrun.broker.store.errors import StoreError
from rmqrun.broker.tls import check_tls_settings

#: The embedded broker's store: StoreConfig's defaults (RocketMQ's), except SYNC flushing. SYNC is *not*
#: RocketMQ's default (ASYNC_FLUSH), but the embedded broker runs tests that kill it with -9 and must not
#: lose an acknowledged message.
EMBEDDED_STORE = StoreConfig(flush_mode=FlushMode.SYNC)


@dataclass(frozen=True)
class BrokerConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    #: 0 picks a free port (reported by :attr:`EmbeddedBroker.broker_address`).
    port: int = 10911
    namesrv_host: str = "127.0.0.1"
    namesrv_port: int = 9876
    #: The IP registered with the name server (what clients on other hosts connect to)
    #: and the store host written into every message (and so into every offset message
    #: id). ``None``: ``host`` when it is a concrete address, else the machine's first
    #: non-loopback address, else 127.0.0.1 (see advertise.py); resolved on construction.
    advertise_host: str | None = None

    #: The name server serves ORDER_TOPIC_CONFIG (``topic create --order``) in routes as
    #: ``orderTopicConf`` (NamesrvConfig.orderMessageEnable, off by default as in RocketMQ).
    order_message_enable: bool = False

    broker_name: str = "broker-a"
    #: What the broker lets clients do whatever a topic's own perm says (brokerPermission): 6 read and
    #: write, 4 read only (routes say so and producers go elsewhere), 2 write only (pulls refused).
    #: ``mqadmin updateBrokerConfig -k brokerPermission -v 4`` changes it while the broker runs.
    broker_permission: int = 6
    cluster_name: str = "DefaultCluster"
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    #: Create the message-trace topic at start (traceTopicEnable, off as in RocketMQ): one queue, a system
    #: topic, named ``msg_trace_topic_name`` (msgTraceTopicName). Trace-enabled clients send their records
    #: there and ``queryMsgTraceById`` reads them back through the key index; without it the topic is
    #: auto-created by the first trace send like any other.
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"

    #: The message store's settings (sizes, flush mode, delay levels, retention): see store/config.py.
    store: StoreConfig = EMBEDDED_STORE
    #: How long a SYNC-flush send waits for its fsync before the answer is FLUSH_DISK_TIMEOUT
    #: (MessageStoreConfig.syncFlushTimeout, 5 s).
    sync_flush_timeout_ms: int = 5000

    auto_create_topic: bool = True
    #: Queues of TBW102, the template of auto-created topics (BrokerConfig.defaultTopicQueueNums).
    default_topic_queue_nums: int = 8
    #: ``None``: an auto-created topic gets min(the producer's defaultTopicQueueNums, TBW102's),
    #: which is 4 with every stock client, like a real broker. A number forces that many.
    auto_create_queue_nums: int | None = None
    auto_create_subscription_group: bool = True

    #: Retries a group gets when the client does not say (SubscriptionGroupConfig.retryMaxTimes).
    retry_max_times: int = 16

    long_polling: bool = True
    short_polling_ms: int = 1000
    max_transfer_count_in_memory: int = 32
    max_transfer_bytes_in_memory: int = 256 * 1024
    max_transfer_count_on_disk: int = 8
    max_transfer_bytes_on_disk: int = 64 * 1024
    #: A message further than this share of physical memory behind the commit-log end is
    #: "on disk" (accessMessageInMemoryMaxRatio); it shrinks pull batches, as in RocketMQ.
    access_message_in_memory_max_ratio: int = 40

    channel_expired_ms: int = 120_000
    channel_scan_interval_ms: int = 10_000
    lock_max_live_ms: int = 60_000
    notify_consumer_ids_changed: bool = True
    #: Period of persisting consumer offsets and the delay offset table (RocketMQ: 5 s / 10 s).
    persist_interval_ms: int = 5000

    # -- security (issue #9) --
    #: A ``plain_acl.yml`` (RocketMQ 4.x layout): every broker request is checked against it as a
    #: 4.9.8 broker with ``aclEnable=true`` checks it. None: no ACL (signatures are ignored). The
    #: name server stays open, as in 4.x.
    acl_file: str | None = None
    #: PEM certificate chain and private key: both servers speak TLS (see ``tls_mode``).
    tls_cert: str | None = None
    tls_key: str | None = None
    #: ``permissive`` (TLS and plain on the same port, told apart by the first byte; Java's
    #: default tlsMode) or ``enforcing`` (TLS only). Only with ``tls_cert``/``tls_key``.
    tls_mode: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_dir", Path(self.data_dir))
        if self.advertise_host is None:
            object.__setattr__(self, "advertise_host", default_advertise_host(self.host))
        else:
            check_advertise_host(self.advertise_host)
        for name in ("port", "namesrv_port"):
            value = getattr(self, name)
            if not 0 <= value <= 65535:
                raise ValueError(f"{name}={value} is not a TCP port")
        if not self.msg_trace_topic_name or len(self.msg_trace_topic_name) > 127 or any(
                not (ch.isascii() and (ch.isalnum() or ch in "%|_-")) for ch in self.msg_trace_topic_name):
            raise ValueError(f"msg_trace_topic_name={self.msg_trace_topic_name!r} is not a topic name "
                             f"(letters, digits, '%', '|', '_', '-'; at most 127)")
        if not 0 <= self.broker_permission <= 7:
            raise ValueError(f"broker_permission={self.broker_permission} is not a permission (0-7; 6 read-write)")
        if self.default_topic_queue_nums < 1:
            raise ValueError(f"default_topic_queue_nums={self.default_topic_queue_nums} must be >= 1")
        if self.auto_create_queue_nums is not None and self.auto_create_queue_nums < 1:
            raise ValueError(f"auto_create_queue_nums={self.auto_create_queue_nums} must be >= 1")
        for name in ("channel_expired_ms", "channel_scan_interval_ms", "lock_max_live_ms",
                     "persist_interval_ms", "short_polling_ms", "sync_flush_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")

        self._check_security()

    def _check_security(self) -> None:
        if self.acl_file is not None:
            load_acl_file(self.acl_file)  # refuse a bad file now, before anything listens
        check_tls_settings(self.tls_cert, self.tls_key, self.tls_mode)

    @property
    def delay_levels_ms(self) -> list[int]:
        return parse_delay_levels(self.store.message_delay_levels)

    @property
    def store_host(self) -> str:
        assert self.advertise_host is not None  # resolved in __post_init__
        return self.advertise_host

    def with_ports(self, port: int, namesrv_port: int) -> "BrokerConfig":
        return replace(self, port=port, namesrv_port=namesrv_port)


#: The store's settings that are the broker's too (sizes, flush mode, delay levels, retention), by field name.
STORE_SETTINGS = tuple(f.name for f in dataclasses.fields(StoreConfig) if f.name not in STORE_ONLY)
#: The broker's settings by name: its own fields, then its store's.
BROKER_SETTINGS = tuple(f.name for f in dataclasses.fields(BrokerConfig) if f.name != "store") + STORE_SETTINGS


def settings_of(config: BrokerConfig) -> dict[str, Any]:
    """Every broker setting's value by name, the store's among them (``getBrokerConfig`` shows them so)."""
    return {name: getattr(config.store if name in STORE_SETTINGS else config, name) for name in BROKER_SETTINGS}


def with_settings(config: BrokerConfig | None, **settings: Any) -> dict[str, Any]:
    """``settings`` (broker and store settings by name) as BrokerConfig keywords: the store's go into
    ``store``, replacing those of ``config``'s store (or of :data:`EMBEDDED_STORE`). A bad store value raises
    ValueError naming it, as the broker's own do."""
    store = {k: settings.pop(k) for k in list(settings) if k in STORE_SETTINGS}
    if store:
        try:
            settings["store"] = replace(EMBEDDED_STORE if config is None else config.store, **store)
        except StoreError as exc:
            raise ValueError(str(exc)) from None
    return settings
