"""rmqrun: a process-pool consumer runner for Apache RocketMQ."""

__version__ = "0.1.0"
