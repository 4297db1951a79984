"""The ``namespace`` setting: where it comes from, how a bad one is refused, what the engine and workers get."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rmqrun.cli import settings as table
from rmqrun.cli.namespace_option import resolve_namespace
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.errors import ConfigError
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.supervisor.pool_config import PoolConfig
from rmqrun.supervisor.supervisor import RunSettings, Supervisor

BASE = {"handler": "workers.noop:handle", "namesrv": "127.0.0.1:9876", "group": "G", "topic": "T"}


def test_each_source_of_the_namespace_reaches_the_consumer(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("namespace: FROM_FILE\n")
    assert table.build(table.resolve(BASE, environ={})).consumer.namespace is None
    assert table.build(table.resolve(BASE, config_file=f, environ={})).consumer.namespace == "FROM_FILE"
    env = {"RMQRUN_NAMESPACE": "FROM_ENV"}
    assert table.build(table.resolve(BASE, config_file=f, environ=env)).consumer.namespace == "FROM_ENV"
    cli = {**BASE, "namespace": "FROM_FLAG"}
    resolved = table.resolve(cli, config_file=f, environ=env)
    assert resolved.sources["namespace"] == "command line --namespace"
    assert table.build(resolved).consumer.namespace == "FROM_FLAG"
    # the one-shot commands' option follows the same order
    assert resolve_namespace(None, str(f), environ={}) == "FROM_FILE"
    assert resolve_namespace(None, str(f), environ=env) == "FROM_ENV"
    assert resolve_namespace("FROM_FLAG", str(f), environ=env) == "FROM_FLAG"
    assert resolve_namespace(None, None, environ={}) is None


@pytest.mark.parametrize(("layer", "source"), [("cli", "command line --namespace"),
                                               ("env", "environment RMQRUN_NAMESPACE")])
def test_a_bad_namespace_names_the_key_the_value_and_its_source(layer: str, source: str) -> None:
    cli = {**BASE, "namespace": "a%b"} if layer == "cli" else BASE
    env = {"RMQRUN_NAMESPACE": "a%b"} if layer == "env" else {}
    with pytest.raises(ConfigError) as err:
        table.resolve(cli, environ=env)
    assert str(err.value).startswith(f"namespace='a%b' ({source}) is invalid: ")
    with pytest.raises(ConfigError, match=r"namespace='a%b' \(environment RMQRUN_NAMESPACE\)"):
        resolve_namespace(None, environ={"RMQRUN_NAMESPACE": "a%b"})


def test_a_wrapped_name_too_long_for_rocketmq_is_refused() -> None:
    cfg = ConsumerConfig(group="G", namesrv="h:1", subscriptions={"T" * 120: "*"}, namespace="MQ_INST_XXX")
    with pytest.raises(ConfigError, match=r"topic 'T+' in namespace 'MQ_INST_XXX' is 'MQ_INST_XXX%T+' on the wire: "
                                          r"132 characters, more than RocketMQ's 127"):
        cfg.validate()


def test_on_wire_wraps_group_and_topics_once_and_adds_the_wrapped_retry_topic() -> None:
    cfg = ConsumerConfig(group="G", namesrv="h:1", subscriptions={"A": "TagA", "NS%B": "*", "TBW102": "*"},
                         namespace="NS").validate()
    wire = cfg.on_wire()
    assert wire.group == "NS%G" and cfg.group == "G"
    assert wire.subscriptions == {"NS%A": "TagA", "NS%B": "*", "TBW102": "*"}
    assert wire.all_subscriptions()["%RETRY%NS%G"] == "*"
    assert wire.on_wire() == wire
    plain = ConsumerConfig(group="G", namesrv="h:1", subscriptions={"A": "*"}).validate()
    assert plain.on_wire() is plain


def test_the_workers_are_built_with_the_consumers_namespace_and_group() -> None:
    # set where the settings are built, not patched in later: what build() returns is what the workers get
    built = table.build(table.resolve({**BASE, "namespace": "NS", "otel": True}, environ={}))
    assert (built.pool.worker.namespace, built.pool.worker.consumer_group) == ("NS", "G")
    sup = Supervisor(built)
    assert sup.executor.config is built.pool and sup.executor.pool.config.worker is built.pool.worker


@pytest.mark.parametrize(("worker", "message"), [
    (WorkerConfig("workers.noop:handle", batch_size=1, time_limit=900.0),
     "the workers' namespace None is not the consumer's 'NS'"),
    (WorkerConfig("workers.noop:handle", namespace="NS", otel=True, consumer_group="H", batch_size=1,
                  time_limit=900.0),
     "the workers' consumer_group 'H' is not the consumer's group 'G'"),
])
def test_a_pool_built_apart_from_its_consumer_is_refused(worker: WorkerConfig, message: str) -> None:
    # handlers would see topics under the namespace (or spans another group): say what to build instead
    consumer = ConsumerConfig(group="G", namesrv="h:1", subscriptions={"A": "*"}, namespace="NS")
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        Supervisor(RunSettings(consumer=consumer, pool=PoolConfig(worker, workers=1)))
