"""The puller's per-queue pull header: made once, filled per pull, and made again when what it holds changes."""

from __future__ import annotations

from dataclasses import replace

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.process_queue import ProcessQueue
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.consumer.puller import _pull_template
from rmqrun.model import MessageQueue
from rmqrun.protocol.headers import PullMessageRequestHeader
from rmqrun.protocol.subscription import SubscriptionData

MQ = MessageQueue("T", "broker-a", 2)


def _cfg(**kw: object) -> ConsumerConfig:
    return ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"}, **kw)  # type: ignore[arg-type]


def _expected(cfg: ConsumerConfig, sub: SubscriptionData, offset: int, flag: int, commit: int) -> dict[str, str]:
    """The header as the puller built it before the template: every field from the config and subscription."""
    return PullMessageRequestHeader(
        consumer_group=cfg.group, topic=MQ.topic, queue_id=MQ.queue_id, queue_offset=offset,
        max_msg_nums=cfg.pull_batch_size, sys_flag=flag, commit_offset=commit,
        suspend_timeout_millis=cfg.broker_suspend_max_time_ms,
        subscription=sub.sub_string if cfg.post_subscription_when_pull else None,
        sub_version=sub.sub_version, expression_type=sub.expression_type, bname=MQ.broker_name).to_ext()


def test_the_template_is_made_once_per_queue_and_filled_per_pull() -> None:
    cfg = _cfg()
    sub = SubscriptionData.build("T", "*", sub_version=1)
    req = PullRequest(MQ, ProcessQueue(MQ), next_offset=0)
    first = _pull_template(cfg, req, sub)
    assert _pull_template(cfg, req, sub) is first
    for offset, flag, commit in ((0, 2, 0), (32, 3, 31), (2**40, 7, 2**40 - 1)):
        assert list(first.fill(offset, flag, commit).items()) == list(_expected(cfg, sub, offset, flag, commit).items())


def test_a_new_subscription_or_setting_makes_a_new_template() -> None:
    """A reload that changes the subscription (its expression, its version) or a pull setting must reach the
    very next pull: a stale template would pull with the old filter or be refused for an old version."""
    cfg = _cfg()
    req = PullRequest(MQ, ProcessQueue(MQ), next_offset=0)
    old = SubscriptionData.build("T", "*", sub_version=1)
    _pull_template(cfg, req, old)
    for new_cfg, sub in ((cfg, SubscriptionData.build("T", "TagA || TagB", sub_version=2)),
                         (cfg, SubscriptionData.build("T", "*", sub_version=3)),
                         (replace(cfg, pull_batch_size=8), old),
                         (replace(cfg, post_subscription_when_pull=True), SubscriptionData.build("T", "TagC", sub_version=4)),
                         (replace(cfg, broker_suspend_max_time_ms=1000), old)):
        got = _pull_template(new_cfg, req, sub).fill(5, 2, 4)
        assert list(got.items()) == list(_expected(new_cfg, sub, 5, 2, 4).items())
