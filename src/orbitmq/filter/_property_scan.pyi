from orbitmq.filter.records import ReadableBuffer, RecordValues, Row

def record_values(
    buffer: ReadableBuffer, base: int, limit: int, rows: list[Row], names: tuple[str, ...], /
) -> list[RecordValues]: ...
