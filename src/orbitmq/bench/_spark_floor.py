"""Spark's own cost of taking the source's Arrow batches: the ``spark`` benchmark's floor phase.

A Python data source (``orbitmq-bench-floor``) whose read tasks yield, again and again, the
same Arrow batches the ``orbitmq`` source produced for the benchmark's first messages: the same
schema, row sizes and partitions, but no broker, no pull and no decoding. ``count()`` over it
measures what the JVM side costs (Arrow from the Python worker, rows, the job) with the read
path's Python work removed; a ratio near the orbitmq source's says that the JVM, not the read
path, bounds the read.

The same source also reads as a stream (one micro-batch of every row, under
``Trigger.AvailableNow``), so the benchmark's Parquet floor writes the same rows into Parquet
through the same streaming machinery as the ``orbitmq`` source's Parquet phase.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

FORMAT = "orbitmq-bench-floor"


def save_sample(spark: Any, read_options: dict[str, str], rows: int, path: Path) -> None:
    """Write the first ``rows`` rows of the orbitmq source as an Arrow IPC file at ``path``."""
    import pyarrow as pa  # type: ignore[import-untyped]

    table = spark.read.format("orbitmq").options(**read_options).load().limit(rows).toArrow()
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=rows)


def register(spark: Any) -> None:
    """Register :data:`FORMAT` in ``spark`` (its classes are built here: pyspark is optional)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadLimit

    class _Share(InputPartition):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class _Reader(DataSourceReader):
        def __init__(self, options: Mapping[str, str]) -> None:
            self.path = options["path"]
            self.rows = int(options["rows"])
            self.partitions_count = int(options["partitions"])

        def partitions(self) -> list[InputPartition]:
            return _shares(self.rows, self.partitions_count)

        def read(self, partition: InputPartition) -> Iterator[Any]:
            return _repeat(self.path, partition)

    class _StreamReader(DataSourceStreamReader):
        """Every row in the first micro-batch: offsets go from ``{"rows": 0}`` to ``{"rows": N}``."""

        def __init__(self, options: Mapping[str, str]) -> None:
            self.path = options["path"]
            self.rows = int(options["rows"])
            self.partitions_count = int(options["partitions"])

        def initialOffset(self) -> dict[str, int]:
            return {"rows": 0}

        def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
            return {"rows": self.rows}  # every row in the first micro-batch, whatever the limit

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return _shares(end["rows"] - start["rows"], self.partitions_count)

        def read(self, partition: InputPartition) -> Iterator[Any]:
            return _repeat(self.path, partition)

        def commit(self, end: dict[str, int]) -> None:
            pass

    def _shares(rows: int, partitions_count: int) -> list[InputPartition]:
        share, extra = divmod(rows, partitions_count)
        return [
            _Share(share + (index < extra)) for index in range(partitions_count) if share or index < extra
        ]

    def _repeat(path: str, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa

        with pa.memory_map(path) as source:
            batches = list(pa.ipc.open_file(source).read_all().to_batches())
        assert isinstance(partition, _Share)
        left = partition.rows
        while left > 0:
            for batch in batches:
                if left <= 0:
                    break
                yield batch if batch.num_rows <= left else batch.slice(0, left)
                left -= batch.num_rows

    class _Floor(DataSource):
        @classmethod
        def name(cls) -> str:
            return FORMAT

        def schema(self) -> Any:
            # The orbitmq source's own schema (looked up at run time: bench and spark are
            # sibling layers of the import contract).
            return importlib.import_module("orbitmq.spark._schema").SOURCE_SCHEMA

        def reader(self, schema: Any) -> DataSourceReader:
            return _Reader(self.options)

        def streamReader(self, schema: Any) -> DataSourceStreamReader:
            return _StreamReader(self.options)

    spark.dataSource.register(_Floor)
