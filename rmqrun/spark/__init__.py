"""The PySpark data source ``rocketmq`` (batch and streaming reads, batch and streaming writes).

Usage::

    import rmqrun.spark
    rmqrun.spark.register(spark)
    df = spark.read.format("rocketmq").option("namesrv", "127.0.0.1:9876").option("topic", "T").load()

Importing this package needs neither pyspark nor Java: only :func:`register`
(and the modules that subclass PySpark's classes) do, so ``import rmqrun`` and
``import rmqrun.spark`` stay cheap and work without the ``spark`` extra.
"""

from __future__ import annotations

import shutil
from typing import Any

from rmqrun.errors import RmqrunError

SHORT_NAME = "rocketmq"

_MISSING_PYSPARK = ("rmqrun.spark needs PySpark 4.x: pip install 'rmqrun[spark]' "
                    "(Python >= 3.11 and Java 17+ required)")


class SparkSupportMissing(RmqrunError, RuntimeError):
    """pyspark (the ``spark`` extra) or Java is not installed."""


def require_pyspark() -> None:
    """Raise one clear error line when the ``spark`` extra is not installed."""
    try:
        import pyspark  # noqa: F401
        import pyspark.sql.datasource  # noqa: F401
    except ImportError as e:
        import sys

        if sys.version_info < (3, 11):
            raise SparkSupportMissing(f"{_MISSING_PYSPARK}; this is Python {sys.version.split()[0]}, "
                                      "on which the extra installs nothing") from None
        raise SparkSupportMissing(f"{_MISSING_PYSPARK} ({e})") from None


def require_java() -> None:
    """Spark's JVM needs ``java`` (17+) on PATH or under $JAVA_HOME."""
    import os

    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return
    if shutil.which("java") is None:
        raise SparkSupportMissing("Spark needs Java 17+: no `java` on PATH and $JAVA_HOME is not set "
                                  "(install e.g. openjdk-17-jre-headless)")


def register(spark: Any) -> None:
    """Register the ``rocketmq`` data source with a SparkSession.

    Also lets a ``rocketmq`` batch write be saved without ``.mode("append")``, as
    Spark's Kafka sink is (:mod:`rmqrun.spark.save_mode`).
    """
    require_pyspark()
    from rmqrun.spark.save_mode import accept_default_mode
    from rmqrun.spark.source import RocketMQDataSource

    spark.dataSource.register(RocketMQDataSource)
    accept_default_mode()


def session(master: str = "local[*]", app_name: str = "rmqrun", **conf: str) -> Any:
    """A SparkSession with the ``rocketmq`` source registered, after checking pyspark and Java.

    For local masters it binds to loopback (``SPARK_LOCAL_IP``, unless set) and starts
    Spark's Python workers with this interpreter (``PYSPARK_PYTHON``), so they see the
    packages of this environment. ``conf`` entries are Spark settings
    (``{"spark.sql.shuffle.partitions": "4"}``; pass them as ``**{...}``).
    """
    import os
    import sys

    require_pyspark()
    require_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


__all__ = ["register", "session", "SHORT_NAME", "SparkSupportMissing", "require_pyspark", "require_java"]
