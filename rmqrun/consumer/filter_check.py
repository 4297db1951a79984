"""Whether the brokers can serve the consumer's filters (Java ``MQClientInstance.checkClientInBroker``).

A subscription that is not a tag expression (an SQL92 selector) is sent with CHECK_CLIENT_CONFIG to the
master brokers of its topic before the first heartbeat: a Java broker evaluates SQL92 only with
``enablePropertyFilter=true`` in its broker.conf and refuses the check otherwise, and rmqrun's embedded
broker filters by tag only. Java's push consumer then fails to start; so does ``rmqrun run`` (a
ConfigError, exit 2), and ``rmqrun check`` says the same. Java asks one broker of the route; every master
is asked here, since each of them filters its own queues.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from rmqrun.errors import ConfigError
from rmqrun.namespace import unwrap
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import AccessDeniedError, BrokerError, TopicNotExistError

if TYPE_CHECKING:
    from rmqrun.client.instance import ClientInstance
    from rmqrun.protocol.subscription import SubscriptionData


async def check_filters(instance: "ClientInstance", group: str, subscriptions: Mapping[str, "SubscriptionData"],
                        namespace: str | None = None, timeout: float | None = None) -> int:
    """Raise a ConfigError naming the first master that refuses a subscription's filter; how many checks
    were answered. Tag subscriptions are not asked about (every broker serves them); a topic the name server
    does not know yet is left to the rebalance; an ACL refusal is raised as it is."""
    asked = 0
    for topic, sub in subscriptions.items():
        if sub.is_tag_type:
            continue
        try:
            route = await instance.get_route(topic)  # cached by the caller's route check, or fetched now
        except TopicNotExistError:
            continue
        for bd in route.broker_datas:
            addr = bd.master_address
            if addr is None:
                continue
            try:
                await instance.broker.check_client_config(addr, group, instance.client_id, sub, timeout=timeout)
            except AccessDeniedError:
                raise
            except BrokerError as exc:
                if exc.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED:  # it filters by SQL92: the selector is bad
                    said = exc.remark.strip().splitlines()[0] if exc.remark.strip() else str(exc)
                    raise ConfigError(f"sql: broker {bd.broker_name} at {addr} cannot parse the {sub.expression_type} "
                                      f"selector {sub.sub_string!r} of {unwrap(namespace, topic)}: {said}") from None
                raise ConfigError(
                    f"sql: broker {bd.broker_name} at {addr} refuses the {sub.expression_type} subscription of "
                    f"{unwrap(namespace, topic)} ({exc}): a Java broker filters by SQL92 only with "
                    "enablePropertyFilter=true in its broker.conf, and rmqrun's embedded broker filters by tag "
                    "only; subscribe with --tags there") from None
            asked += 1
    return asked
