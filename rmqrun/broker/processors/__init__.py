"""Request processors of the embedded broker, one module per family (as in RocketMQ's broker)."""
