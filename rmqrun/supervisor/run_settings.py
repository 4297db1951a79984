"""What one run of the supervisor is given: the consumer's settings, the pool's, and the run's own.

Apart from :mod:`rmqrun.supervisor.supervisor` so that the settings table of ``rmqrun run`` reads these
defaults and checks (``run --help`` shows them) without loading the supervisor's machinery. Each default and
check is written once, on its field (see :mod:`rmqrun.setting_rules`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.setting_rules import at_least, check_fields, positive, ruled
from rmqrun.supervisor.pool_config import PoolConfig

if TYPE_CHECKING:
    from rmqrun.supervisor.config_reload import ConfigChange

__all__ = ["RunSettings"]


@dataclass(slots=True)
class RunSettings:
    """The consumer and the pool, built so that they agree (the workers' ``namespace`` and ``consumer_group``
    are the consumer's: the settings table sets them when it builds the pool), and the run's own settings."""

    consumer: ConsumerConfig
    pool: PoolConfig
    #: seconds in-flight work may take to finish on TERM/INT
    grace: float = ruled(30.0, ok=at_least(0), allowed="0 or more seconds")
    #: seconds between status log lines (0 = none)
    status_interval: float = ruled(10.0, ok=at_least(0), allowed="0 or more seconds")
    max_inflight_messages: int = ruled(64, ok=at_least(1), allowed="1 or more")
    #: not ready when no broker has answered for this long (seconds)
    ready_broker_timeout: float = ruled(20.0, ok=positive, allowed="a positive number of seconds")
    #: unhealthy when work waits and no handler call has finished for this long (seconds; 0: off)
    stall_timeout: float = ruled(300.0, ok=at_least(0), allowed="0 or more seconds")
    #: the systemd watchdog pings stop while rmqrun is unhealthy (a wedged pool), so systemd restarts it
    watchdog_checks_health: bool = True
    #: called with a short status text now and then (systemd STATUS=, the demo's progress)
    on_status: Callable[[str], None] | None = field(default=None, repr=False)
    #: called once when consuming has started (systemd READY=1)
    on_ready: Callable[[], None] | None = field(default=None, repr=False)
    #: called when a graceful stop begins (systemd STOPPING=1)
    on_stopping: Callable[[], None] | None = field(default=None, repr=False)
    #: read each signal's sender (and ignore those from workers): blocks the command signals in this thread,
    #: which child processes started meanwhile inherit (see signal_senders); ``rmqrun run`` turns it on
    signal_senders: bool = False
    #: HUP reads the configuration anew with this (``rmqrun run``: file, environment, flags) and applies what
    #: can change live (:mod:`rmqrun.supervisor.config_reload`); None: HUP starts fresh workers only
    reload_config: Callable[[], ConfigChange] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_fields(self)
