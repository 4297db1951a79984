"""The ``rocketmq`` DataSource: options in, the batch/stream readers and writers out.

Spark runs these methods in its Python planner processes, never in the
driver's own Python. Options are parsed and checked (and the brokers asked)
in ``reader()``/``streamReader()``/``writer()``, so a bad option, a topic that
does not exist or a silent name server fails while the query is planned,
with a message naming the option.
"""

from __future__ import annotations

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader,
                                    DataSourceStreamWriter, DataSourceWriter)
from pyspark.sql.types import StructType

from rmqrun.spark import SHORT_NAME
from rmqrun.spark.errors import plainly as _plainly
from rmqrun.spark.options import ReadOptions, WriteOptions
from rmqrun.spark.schema import SCHEMA_DDL


class RocketMQDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("rocketmq")``; see the README's Spark section."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> str:
        return SCHEMA_DDL

    @_plainly
    def reader(self, schema: StructType) -> DataSourceReader:
        from rmqrun.spark.batch import RocketMQBatchReader

        return RocketMQBatchReader(ReadOptions.parse(self.options, streaming=False))

    @_plainly
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from rmqrun.spark.stream import RocketMQStreamReader

        return RocketMQStreamReader(ReadOptions.parse(self.options, streaming=True))

    @_plainly
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from rmqrun.spark.save_mode import refuse_overwrite
        from rmqrun.spark.sink import RocketMQWriter, check_sink_schema

        refuse_overwrite(overwrite)
        opts = WriteOptions.parse(self.options)
        check_sink_schema(schema, topic_option=opts.topic is not None)
        return RocketMQWriter(opts)

    @_plainly
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from rmqrun.spark.sink import RocketMQStreamWriter, check_sink_schema

        opts = WriteOptions.parse(self.options)
        check_sink_schema(schema, topic_option=opts.topic is not None)
        return RocketMQStreamWriter(opts)
