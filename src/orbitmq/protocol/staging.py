"""Staged writes: OrbitMQ's own two requests for writing a batch of messages exactly once.

A writer that may run more than once for the same data (a retried Spark task, a micro-batch
replayed after a crash) *stages* its messages first and *commits* them once per ``(write id,
batch id)``:

``STAGE_MESSAGES`` (40001)
    Header :class:`StageMessagesRequestHeader`; body: a batch body (``protocol.batch``) of
    messages for one topic and queue, each with a ``UNIQ_KEY``. The broker stores the whole
    body as one *staged* record (a half message, invisible to consumers) and answers with
    its commit-log offset in ``commitLogOffset`` and the message count in ``count``.

``COMMIT_STAGED`` (40002)
    Header :class:`CommitStagedRequestHeader`; body: :class:`CommitBody` as JSON. Unless the
    broker's ledger already holds the key, it records the key with the body and restores
    every listed staged record's messages into their real topic and queue. The answer's
    ``alreadyCommitted`` says which happened; when ``true`` the body is the :class:`CommitBody`
    recorded the first time (a replayed batch then knows what was committed where).

``remote`` is opaque to the broker that receives it: a writer whose chunks sit on several
brokers sends everything to one *coordinating* broker first (its own chunks as ``chunks``,
the others' as ``remote``), then each other broker its part (see ``client/staging.py``).
This module is pure: header dataclasses and the JSON body codec.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from orbitmq.errors import RemoteProtocolError
from orbitmq.protocol.header_fields import HeaderBase, Int32, Text

STAGED_WRITE_PROPERTY = "ORBIT_STAGED_WRITE"
"""On a staged record: ``<write id>:<batch id>``, checked when the record is committed."""
STAGED_COUNT_PROPERTY = "ORBIT_STAGED_COUNT"
"""On a staged record: how many messages its body holds."""


@dataclass(frozen=True, slots=True)
class StageMessagesRequestHeader(HeaderBase):
    """STAGE_MESSAGES (40001): where the messages go once committed, and whose write they are.

    The group, topic, write id and batch id are checked by the handler (a send's checks and
    codes, and the key's own shape); the header bounds every field's size.
    """

    producer_group: Text
    topic: Text
    queue_id: Int32
    write_id: Text
    batch_id: int
    born_timestamp: int = 0
    default_topic: Text = "TBW102"
    default_topic_queue_nums: Int32 = 4


@dataclass(frozen=True, slots=True)
class CommitStagedRequestHeader(HeaderBase):
    """COMMIT_STAGED (40002): the ledger key."""

    write_id: Text
    batch_id: int


@dataclass(frozen=True, slots=True)
class CommitBody:
    """The staged records one broker commits, and the other brokers' part (opaque to it).

    ``chunks`` are commit-log offsets of staged records on the receiving broker, in the
    order their messages are to be written; ``remote`` maps other broker names to theirs.
    """

    chunks: list[int] = field(default_factory=list)
    remote: dict[str, list[int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        return orjson.dumps({"chunks": self.chunks, "remote": self.remote})

    @classmethod
    def decode(cls, data: bytes) -> CommitBody:
        """Raises: RemoteProtocolError: not JSON of this shape."""
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise RemoteProtocolError(f"commit body is not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            doc = {"chunks": None}
        chunks = doc.get("chunks", [])
        remote = doc.get("remote", {})
        if (
            not _offsets(chunks)
            or not isinstance(remote, dict)
            or not all(isinstance(name, str) and _offsets(offsets) for name, offsets in remote.items())
        ):
            raise RemoteProtocolError(
                'commit body must be {"chunks": [commit-log offsets], "remote": {broker: [offsets]}}'
            )
        return cls(list(chunks), {name: list(offsets) for name, offsets in remote.items()})


def _offsets(value: object) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, int) and not isinstance(item, bool) and item >= 0 for item in value
    )
