"""The ``orbitmq`` data source for PySpark's Python Data Source API.

Register it once per session, then use it like Spark's Kafka source::

    from orbitmq.spark import register
    register(spark)
    df = (spark.readStream.format("orbitmq")
          .option("namesrvAddr", "127.0.0.1:9876").option("topic", "Orders").load())

Options are validated here, on the driver, before any reader or writer exists; the option
reference lives in docs/spark.md and :mod:`orbitmq.spark._options`.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from orbitmq.errors import ConfigError
from orbitmq.spark._errors import plain_errors
from orbitmq.spark._options import parse_read_options, parse_write_options
from orbitmq.spark._reader import OrbitBatchReader, OrbitStreamReader
from orbitmq.spark._schema import SOURCE_SCHEMA, check_write_schema
from orbitmq.spark._writer import OrbitBatchWriter, OrbitStreamWriter

FORMAT_NAME = "orbitmq"


class OrbitDataSource(DataSource):
    """Reads OrbitMQ topics as rows (batch and streaming) and writes rows as messages."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    @plain_errors
    def schema(self) -> StructType:
        # Spark asks for the schema when a read is defined (load()), not for writes: a read's
        # options are checked here, so a streaming read's mistakes surface at load() rather
        # than when the query runs. What depends on batch or streaming is checked below.
        parse_read_options(dict(self.options), streaming=None)
        return SOURCE_SCHEMA

    @plain_errors
    def reader(self, schema: StructType) -> DataSourceReader:
        _check_read_schema(schema)
        return OrbitBatchReader(parse_read_options(dict(self.options), streaming=False))

    @plain_errors
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_read_schema(schema)
        return OrbitStreamReader(parse_read_options(dict(self.options), streaming=True))

    @plain_errors
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        check_write_schema(schema.names)
        return OrbitBatchWriter(parse_write_options(dict(self.options)))

    @plain_errors
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        check_write_schema(schema.names)
        return OrbitStreamWriter(parse_write_options(dict(self.options)))


def _check_read_schema(schema: StructType) -> None:
    # The rows' shape is fixed (as in Spark's Kafka source); select or cast columns after load().
    if schema.simpleString() != SOURCE_SCHEMA.simpleString():
        raise ConfigError(
            f"format orbitmq has a fixed schema {SOURCE_SCHEMA.simpleString()}; got {schema.simpleString()}"
        )
