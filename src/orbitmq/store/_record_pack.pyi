from orbitmq.protocol.message_codec import WritableBuffer

def pack_records(
    buffer: WritableBuffer,
    position: int,
    template: bytes,
    base_offset: int,
    queue_offset: int,
    step: int,
    flags: list[int],
    bodies: list[bytes],
    topic_head: bytes,
    properties: list[bytes],
    /,
) -> tuple[int, list[int], list[int]]: ...
