"""Which processor serves which request code.

Anything not listed here is answered REQUEST_CODE_NOT_SUPPORTED by the
remoting server (never left unanswered). A code listed here must have a spec in
:mod:`rmqrun.protocol.requests` that says the broker serves it, or the broker
does not start (:func:`~rmqrun.protocol.requests.register_served`). The registry is handed the broker as a
:class:`~rmqrun.broker.processors.context.BrokerContext` (what the processors
may use of it, including the server to register on), so nothing here or in a
processor imports :mod:`rmqrun.broker.broker` back.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqrun.broker.processors.admin import AdminProcessor
from rmqrun.broker.processors.assignment import AssignmentProcessor
from rmqrun.broker.processors.clients import ClientProcessor
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.broker.processors.forward import ForwardProcessor
from rmqrun.broker.processors.inspect import InspectProcessor
from rmqrun.broker.processors.maintenance import MaintenanceProcessor
from rmqrun.broker.processors.offsets import OffsetProcessor
from rmqrun.broker.processors.pop import PopProcessor
from rmqrun.broker.processors.pop_ack import PopAckProcessor
from rmqrun.broker.processors.pull import PullProcessor
from rmqrun.broker.processors.send import SendProcessor
from rmqrun.broker.processors.statistics import StatisticsProcessor
from rmqrun.protocol.requests import Server, register_served
from rmqrun.remoting.codes import RequestCode as R


@dataclass(frozen=True, slots=True)
class Processors:
    send: SendProcessor
    pull: PullProcessor
    offsets: OffsetProcessor
    clients: ClientProcessor
    admin: AdminProcessor
    inspect: InspectProcessor
    forward: ForwardProcessor
    maintenance: MaintenanceProcessor
    statistics: StatisticsProcessor
    pop: PopProcessor
    pop_ack: PopAckProcessor
    assignment: AssignmentProcessor


def register_all(broker: BrokerContext) -> Processors:
    inspect = InspectProcessor(broker)
    p = Processors(SendProcessor(broker), PullProcessor(broker), OffsetProcessor(broker),
                   ClientProcessor(broker), AdminProcessor(broker),
                   inspect, ForwardProcessor(broker), MaintenanceProcessor(broker),
                   StatisticsProcessor(broker, inspect), PopProcessor(broker), PopAckProcessor(broker),
                   AssignmentProcessor(broker))
    table = {
        R.SEND_MESSAGE: p.send.send,
        R.SEND_MESSAGE_V2: p.send.send,
        R.SEND_BATCH_MESSAGE: p.send.send,
        R.CONSUMER_SEND_MSG_BACK: p.send.send_back,
        R.PULL_MESSAGE: p.pull.pull,
        R.QUERY_CONSUMER_OFFSET: p.offsets.query_consumer_offset,
        R.UPDATE_CONSUMER_OFFSET: p.offsets.update_consumer_offset,
        R.GET_MAX_OFFSET: p.offsets.get_max_offset,
        R.GET_MIN_OFFSET: p.offsets.get_min_offset,
        R.SEARCH_OFFSET_BY_TIMESTAMP: p.offsets.search_offset_by_timestamp,
        R.GET_EARLIEST_MSG_STORETIME: p.offsets.get_earliest_msg_storetime,
        R.HEART_BEAT: p.clients.heartbeat,
        R.UNREGISTER_CLIENT: p.clients.unregister_client,
        R.GET_CONSUMER_LIST_BY_GROUP: p.clients.get_consumer_list,
        R.CHECK_CLIENT_CONFIG: p.clients.check_client_config,
        R.LOCK_BATCH_MQ: p.clients.lock_batch,
        R.UNLOCK_BATCH_MQ: p.clients.unlock_batch,
        R.UPDATE_AND_CREATE_TOPIC: p.admin.update_and_create_topic,
        R.GET_ALL_TOPIC_CONFIG: p.admin.get_all_topic_config,
        R.GET_TOPIC_CONFIG: p.admin.get_topic_config,
        R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: p.admin.update_and_create_subscription_group,
        R.DELETE_SUBSCRIPTIONGROUP: p.admin.delete_subscription_group,
        R.VIEW_MESSAGE_BY_ID: p.admin.view_message_by_id,
        R.QUERY_TOPIC_CONSUME_BY_WHO: p.admin.query_topic_consume_by_who,
        R.DELETE_TOPIC_IN_BROKER: p.admin.delete_topic_in_broker,
        R.GET_BROKER_CONFIG: p.inspect.get_broker_config,
        R.GET_BROKER_RUNTIME_INFO: p.inspect.get_broker_runtime_info,
        R.GET_TOPIC_STATS_INFO: p.inspect.get_topic_stats_info,
        R.GET_CONSUMER_CONNECTION_LIST: p.inspect.get_consumer_connection_list,
        R.GET_PRODUCER_CONNECTION_LIST: p.inspect.get_producer_connection_list,
        R.GET_CONSUME_STATS: p.inspect.get_consume_stats,
        R.QUERY_MESSAGE: p.inspect.query_message,
        R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: p.inspect.get_all_subscription_group_config,
        R.QUERY_TOPICS_BY_CONSUMER: p.inspect.query_topics_by_consumer,
        R.INVOKE_BROKER_TO_RESET_OFFSET: p.forward.invoke_reset_offset,
        R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: p.forward.invoke_get_consumer_status,
        R.GET_CONSUMER_RUNNING_INFO: p.forward.get_consumer_running_info,
        R.CONSUME_MESSAGE_DIRECTLY: p.forward.consume_message_directly,
        R.GET_ALL_PRODUCER_INFO: p.inspect.get_all_producer_info,
        R.QUERY_CONSUME_QUEUE: p.inspect.query_consume_queue,
        R.UPDATE_BROKER_CONFIG: p.maintenance.update_broker_config,
        R.CLEAN_EXPIRED_CONSUMEQUEUE: p.maintenance.clean_expired_consume_queue,
        R.CLEAN_UNUSED_TOPIC: p.maintenance.clean_unused_topic,
        R.DELETE_EXPIRED_COMMITLOG: p.maintenance.delete_expired_commit_log,
        R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: p.maintenance.get_system_topic_list,
        R.VIEW_BROKER_STATS_DATA: p.statistics.view_broker_stats_data,
        R.GET_BROKER_CONSUME_STATS: p.statistics.get_broker_consume_stats,
        R.POP_MESSAGE: p.pop.pop_message,
        R.NOTIFICATION: p.pop.notification,
        R.POLLING_INFO: p.pop.polling_info,
        R.ACK_MESSAGE: p.pop_ack.ack_message,
        R.BATCH_ACK_MESSAGE: p.pop_ack.batch_ack_message,
        R.CHANGE_MESSAGE_INVISIBLETIME: p.pop_ack.change_invisible_time,
        R.QUERY_ASSIGNMENT: p.assignment.query_assignment,
        R.SET_MESSAGE_REQUEST_MODE: p.assignment.set_message_request_mode,
        R.GET_ALL_MESSAGE_REQUEST_MODE: p.assignment.get_all_message_request_mode,
    }
    register_served(broker.server.register, Server.BROKER, table)
    return p
