"""The batch sink's save modes, as Spark's Kafka sink has them: append and the default (ErrorIfExists) write,
overwrite is refused.

A topic's messages cannot be replaced or truncated, so "overwrite" could only
mean "append" in disguise: the Kafka sink refuses it, and so does this one
(:func:`refuse_overwrite`, from ``DataSource.writer``). The Kafka sink takes the
default mode, ErrorIfExists, as an append (there is no "existing data" to
collide with), so ``df.write.format("kafka").save()`` works without a mode.
Spark 4's Python data sources cannot say that themselves: the JVM refuses every
mode but append and overwrite before the source is asked. :func:`accept_default_mode`,
installed by :func:`rmqrun.spark.register`, makes PySpark's ``DataFrameWriter``
ask for append when a ``rocketmq`` write is saved with no mode or the default
one; any other format and any other mode are passed on untouched.
"""

from __future__ import annotations

from typing import Any

from rmqrun.spark.errors import OptionError

#: the names PySpark accepts for the default mode (``DataFrameWriter.mode``)
DEFAULT_MODES = frozenset({"error", "errorifexists", "default"})
_MARK = "_rmqrun_accepts_default_mode"


def refuse_overwrite(overwrite: bool) -> None:
    """A batch write with ``mode("overwrite")``: refused, naming the modes that work (as the Kafka sink)."""
    if overwrite:
        raise OptionError("rocketmq sink: save mode Overwrite is not allowed (a topic's messages cannot be "
                          "replaced); use mode(\"append\") or no mode at all, as with Spark's Kafka sink")


def _is_rocketmq(source: Any) -> bool:
    from rmqrun.spark import SHORT_NAME
    return isinstance(source, str) and source.strip().lower() == SHORT_NAME


def accept_default_mode() -> None:
    """Patch PySpark's ``DataFrameWriter`` once (idempotent) so a ``rocketmq`` save with the default mode appends."""
    from pyspark.sql.readwriter import DataFrameWriter

    if getattr(DataFrameWriter, _MARK, False):
        return
    original_format, original_mode, original_save = DataFrameWriter.format, DataFrameWriter.mode, DataFrameWriter.save

    def format(self: Any, source: str) -> Any:  # noqa: A001 - PySpark's name
        self._rmqrun_format = source
        return original_format(self, source)

    def mode(self: Any, saveMode: Any) -> Any:  # noqa: N803 - PySpark's name
        self._rmqrun_mode = saveMode
        return original_mode(self, saveMode)

    def save(self: Any, path: Any = None, format: Any = None, mode: Any = None,  # noqa: A002
             partitionBy: Any = None, **options: Any) -> Any:  # noqa: N803
        source = format if format is not None else getattr(self, "_rmqrun_format", None)
        chosen = mode if mode is not None else getattr(self, "_rmqrun_mode", None)
        if _is_rocketmq(source) and (chosen is None or str(chosen).strip().lower() in DEFAULT_MODES):
            mode = "append"  # the Kafka sink's reading of the default mode
        return original_save(self, path, format, mode, partitionBy, **options)

    for name, fn, original in (("format", format, original_format), ("mode", mode, original_mode),
                               ("save", save, original_save)):
        fn.__doc__, fn.__name__, fn.__qualname__ = original.__doc__, original.__name__, original.__qualname__
        setattr(DataFrameWriter, name, fn)
    setattr(DataFrameWriter, _MARK, True)
