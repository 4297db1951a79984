"""The Java push consumer's defaults and internal constants, in one place.

Values are those of the Apache RocketMQ 4.9.8 Java client (DefaultMQPushConsumer,
ClientConfig, ProcessQueue, RebalancePushImpl, ConsumeMessage*Service); see
shared/ROCKETMQ_FACTS.md sections 1.1 and 1.2. Keeping them here, named, lets the
consumer logic, the settings table and the tests agree on one number, and makes
every deliberate deviation from Java visible as a diff against this file.

All durations are in milliseconds unless the name says otherwise.
"""

from __future__ import annotations

import os

# --- DefaultMQPushConsumer settings (FACTS §1.1) --------------------------------
CONSUME_THREAD_MIN = 20
CONSUME_THREAD_MAX = 20
ADJUST_THREAD_POOL_NUMS_THRESHOLD = 100_000
CONSUME_CONCURRENTLY_MAX_SPAN = 2000
"""Pulling pauses while ``last offset - first offset`` of a queue's cache exceeds this."""
PULL_THRESHOLD_FOR_QUEUE = 1000
"""Cached messages per queue before pulling pauses."""
PULL_THRESHOLD_SIZE_FOR_QUEUE_MIB = 100
"""Cached body MiB per queue before pulling pauses (bodies only, like Java)."""
PULL_THRESHOLD_FOR_TOPIC = -1
PULL_THRESHOLD_SIZE_FOR_TOPIC_MIB = -1
PULL_INTERVAL_MS = 0
PULL_BATCH_SIZE = 32
CONSUME_MESSAGE_BATCH_MAX_SIZE = 1
POST_SUBSCRIPTION_WHEN_PULL = False
MAX_RECONSUME_TIMES = -1
"""-1 means 16 in concurrent mode and Integer.MAX_VALUE in orderly mode (Java)."""
MAX_RECONSUME_TIMES_CONCURRENTLY_WHEN_UNSET = 16
MAX_RECONSUME_TIMES_ORDERLY_WHEN_UNSET = 2**31 - 1
SUSPEND_CURRENT_QUEUE_TIME_MS = 1000
SUSPEND_CURRENT_QUEUE_TIME_MIN_MS = 10
SUSPEND_CURRENT_QUEUE_TIME_MAX_MS = 30_000
CONSUME_TIMEOUT_MINUTES = 15
AWAIT_TERMINATION_MS_WHEN_SHUTDOWN = 0
CONSUME_TIMESTAMP_OFFSET_MS = 30 * 60 * 1000
"""consumeTimestamp defaults to now minus half an hour (format yyyyMMddHHmmss)."""
ALLOCATE_STRATEGY = "AVG"
MESSAGE_MODEL = "CLUSTERING"
CONSUME_FROM_WHERE = "CONSUME_FROM_LAST_OFFSET"

# --- ClientConfig (FACTS §1.1) -----------------------------------------------------
POLL_NAME_SERVER_INTERVAL_MS = 30_000
HEARTBEAT_BROKER_INTERVAL_MS = 30_000
PERSIST_CONSUMER_OFFSET_INTERVAL_MS = 5000
PULL_TIME_DELAY_MS_WHEN_EXCEPTION = 1000
MQ_CLIENT_API_TIMEOUT_MS = 3000
INSTANCE_NAME = "DEFAULT"

# --- Internal constants (FACTS §1.2) -----------------------------------------------
PULL_TIME_DELAY_MS_WHEN_CACHE_FLOW_CONTROL = 50
PULL_TIME_DELAY_MS_WHEN_BROKER_FLOW_CONTROL = 20
PULL_TIME_DELAY_MS_WHEN_SUSPEND = 1000
BROKER_SUSPEND_MAX_TIME_MS = 15_000
CONSUMER_TIMEOUT_MS_WHEN_SUSPEND = 30_000
REBALANCE_LOCK_MAX_LIVE_TIME_MS = 30_000
"""A process queue's local lock counts as expired this long after the last renewal."""
REBALANCE_LOCK_INTERVAL_MS = 20_000
"""lockAll() renewal period; first run 1 s after start."""
REBALANCE_LOCK_FIRST_DELAY_MS = 1000
PULL_MAX_IDLE_TIME_MS = 120_000
"""A process queue not pulled for this long is dropped at the next rebalance."""
MAX_TIME_CONSUME_CONTINUOUSLY_MS = 60_000
UNLOCK_DELAY_TIME_MS = 20_000
"""Orderly: a removed queue that still caches messages is unlocked this much later."""
REBALANCE_WAIT_INTERVAL_MS = 20_000
REBALANCE_MIN_INTERVAL_MS = 1000
BROKER_LOCK_MAX_LIVE_TIME_MS = 60_000
SEND_BACK_FAILED_RESUBMIT_DELAY_MS = 5000
SEND_BACK_TIMEOUT_MS = 5000
LOCK_BATCH_MQ_TIMEOUT_MS = 1000
OFFSET_COMMIT_TIMEOUT_MS = 5000
"""RemoteBrokerOffsetStore sends UPDATE_CONSUMER_OFFSET (oneway) with this timeout."""
CLEAN_EXPIRED_MAX_PER_PASS = 16
"""cleanExpiredMsg checks at most this many head messages of a queue per pass."""
EXPIRED_MESSAGE_DELAY_LEVEL = 3
"""Delay level used when sending back a message that exceeded consumeTimeout."""

# --- Allocation ----------------------------------------------------------------------
CONSISTENT_HASH_VIRTUAL_NODES = 10

# --- Broadcasting offset store ---------------------------------------------------------
LOCAL_OFFSET_STORE_DIR = os.path.join(os.path.expanduser("~"), ".rocketmq_offsets")
"""Java: -Drocketmq.client.localOffsetStoreDir, default ~/.rocketmq_offsets."""
LOCAL_OFFSET_FILE_NAME = "offsets.json"

# --- POP consumption (RocketMQ 5.x DefaultMQPushConsumer) ------------------------------
CONSUME_MODE = "pull"
CONSUME_MODES = ("pull", "pop", "auto")
POP_INVISIBLE_TIME_MS = 60_000
"""popInvisibleTime; the Java client refuses values outside [5 s, 300 s] (MIN/MAX_POP_INVISIBLE_TIME)."""
MIN_POP_INVISIBLE_TIME_MS = 5_000
MAX_POP_INVISIBLE_TIME_MS = 300_000
POP_POLL_TIME_MS = 15_000
"""pollTime of each POP request (the Java client sends BROKER_SUSPEND_MAX_TIME_MILLIS)."""
POP_BATCH_NUMS = 32
"""popBatchNums: messages per POP request, 1 to 32 (the broker refuses more)."""
POP_THRESHOLD_FOR_QUEUE = 96
"""popThresholdForQueue: un-acked popped messages per assignment before popping pauses."""
