"""Every request code the broker serves, mapped to its handler: the broker's routing table.

Start here to follow any request: find its code below, then the handler class in
``broker/handlers/``. The ACL admin codes (50-54) are added by :class:`BrokerApp` beside this
table, from :class:`~orbitmq.broker.handlers.acl.AclHandlers`, because they need the running
ACL service; with ``aclEnable=true`` the whole finished table sits behind the ACL check.
"""

from __future__ import annotations

from orbitmq.broker.handlers import BrokerState
from orbitmq.broker.handlers.admin import AdminHandlers
from orbitmq.broker.handlers.broker_info import BrokerInfoHandlers
from orbitmq.broker.handlers.client_manage import ClientManageHandlers
from orbitmq.broker.handlers.client_relay import ClientRelayHandlers
from orbitmq.broker.handlers.group_admin import GroupAdminHandlers
from orbitmq.broker.handlers.offsets import OffsetHandlers
from orbitmq.broker.handlers.pop import PopHandlers
from orbitmq.broker.handlers.pull import PullHandlers
from orbitmq.broker.handlers.query import QueryHandlers
from orbitmq.broker.handlers.recall import RecallHandlers
from orbitmq.broker.handlers.reply import ReplyHandlers
from orbitmq.broker.handlers.send import SendHandlers
from orbitmq.broker.handlers.send_back import SendBackHandlers
from orbitmq.broker.handlers.staging import StagingHandlers
from orbitmq.broker.handlers.sync import SyncHandlers
from orbitmq.broker.handlers.transaction import TransactionHandlers
from orbitmq.protocol.codes import RequestCode
from orbitmq.transport.server import Handler

__all__ = ["build_handler_table"]


def build_handler_table(state: BrokerState, client_manage: ClientManageHandlers) -> dict[int, Handler]:
    """Every request code the broker serves, mapped to its handler (RocketMQ's registerProcessor)."""
    send = SendHandlers(state)
    send_back = SendBackHandlers(state, send)
    pull = PullHandlers(state)
    offsets = OffsetHandlers(state)
    admin = AdminHandlers(state)
    broker_info = BrokerInfoHandlers(state)
    group_admin = GroupAdminHandlers(state)
    relay = ClientRelayHandlers(state)
    reply = ReplyHandlers(state, send)
    query = QueryHandlers(state)
    transaction = TransactionHandlers(state)
    staging = StagingHandlers(state)
    sync = SyncHandlers(state)
    pop = PopHandlers(state)
    recall = RecallHandlers(state)
    return {
        RequestCode.SEND_MESSAGE: send.send_message_now,
        RequestCode.SEND_MESSAGE_V2: send.send_message_now,
        RequestCode.SEND_BATCH_MESSAGE: send.send_message_now,
        RequestCode.CONSUMER_SEND_MSG_BACK: send_back.consumer_send_msg_back,
        RequestCode.PULL_MESSAGE: pull.pull_message,
        RequestCode.LITE_PULL_MESSAGE: pull.pull_message,
        RequestCode.QUERY_CONSUMER_OFFSET: offsets.query_consumer_offset,
        RequestCode.UPDATE_CONSUMER_OFFSET: offsets.update_consumer_offset,
        RequestCode.GET_MAX_OFFSET: offsets.get_max_offset,
        RequestCode.GET_MIN_OFFSET: offsets.get_min_offset,
        RequestCode.GET_EARLIEST_MSG_STORETIME: offsets.get_earliest_msg_storetime,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: offsets.search_offset_by_timestamp,
        RequestCode.HEART_BEAT: client_manage.heart_beat,
        RequestCode.UNREGISTER_CLIENT: client_manage.unregister_client,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP: client_manage.get_consumer_list_by_group,
        RequestCode.LOCK_BATCH_MQ: client_manage.lock_batch_mq,
        RequestCode.UNLOCK_BATCH_MQ: client_manage.unlock_batch_mq,
        RequestCode.CHECK_CLIENT_CONFIG: client_manage.check_client_config,
        RequestCode.UPDATE_AND_CREATE_TOPIC: admin.update_and_create_topic,
        RequestCode.DELETE_TOPIC_IN_BROKER: admin.delete_topic_in_broker,
        RequestCode.GET_ALL_TOPIC_CONFIG: admin.get_all_topic_config,
        RequestCode.GET_TOPIC_CONFIG: admin.get_topic_config,
        RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: admin.get_subscription_group_config,
        RequestCode.QUERY_CONSUME_QUEUE: admin.query_consume_queue,
        RequestCode.VIEW_MESSAGE_BY_ID: query.view_message_by_id,
        RequestCode.QUERY_MESSAGE: query.query_message,
        RequestCode.END_TRANSACTION: transaction.end_transaction,
        RequestCode.STAGE_MESSAGES: staging.stage_messages,
        RequestCode.COMMIT_STAGED: staging.commit_staged,
        RequestCode.GET_BROKER_RUNTIME_INFO: broker_info.get_broker_runtime_info,
        RequestCode.VIEW_BROKER_STATS_DATA: broker_info.view_broker_stats_data,
        RequestCode.GET_BROKER_CONFIG: broker_info.get_broker_config,
        RequestCode.UPDATE_BROKER_CONFIG: broker_info.update_broker_config,
        RequestCode.GET_TOPIC_STATS_INFO: group_admin.get_topic_stats_info,
        RequestCode.GET_CONSUME_STATS: group_admin.get_consume_stats,
        RequestCode.GET_BROKER_CONSUME_STATS: group_admin.get_broker_consume_stats,
        RequestCode.GET_CONSUMER_CONNECTION_LIST: group_admin.get_consumer_connection_list,
        RequestCode.GET_PRODUCER_CONNECTION_LIST: group_admin.get_producer_connection_list,
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: group_admin.query_topic_consume_by_who,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: group_admin.get_all_subscription_group_config,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: group_admin.update_and_create_subscription_group,
        RequestCode.DELETE_SUBSCRIPTIONGROUP: group_admin.delete_subscription_group,
        RequestCode.CLONE_GROUP_OFFSET: group_admin.clone_group_offset,
        RequestCode.GET_CONSUMER_RUNNING_INFO: relay.get_consumer_running_info,
        RequestCode.CONSUME_MESSAGE_DIRECTLY: relay.consume_message_directly,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: relay.invoke_broker_to_reset_offset,
        RequestCode.SEND_REPLY_MESSAGE: reply.send_reply_message,
        RequestCode.SEND_REPLY_MESSAGE_V2: reply.send_reply_message,
        RequestCode.GET_ALL_CONSUMER_OFFSET: sync.get_all_consumer_offset,
        RequestCode.MERGE_CONSUMER_OFFSET: sync.merge_consumer_offset,
        RequestCode.GET_ALL_DELAY_OFFSET: sync.get_all_delay_offset,
        RequestCode.GET_TIMER_CHECK_POINT: sync.get_timer_check_point,
        RequestCode.GET_BROKER_HA_STATUS: sync.get_broker_ha_status,
        RequestCode.GET_BROKER_EPOCH_CACHE: sync.get_broker_epoch_cache,
        RequestCode.POP_MESSAGE: pop.pop_message,
        RequestCode.ACK_MESSAGE: pop.ack_message,
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME: pop.change_invisible_time,
        RequestCode.RECALL_MESSAGE: recall.recall_message,
    }
