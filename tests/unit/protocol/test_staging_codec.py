"""The staged-write request bodies and headers round-trip, and malformed bodies are refused."""

from __future__ import annotations

import pytest

from orbitmq.errors import RemoteProtocolError
from orbitmq.protocol.staging import CommitBody, CommitStagedRequestHeader, StageMessagesRequestHeader


def test_commit_body_round_trips() -> None:
    body = CommitBody([5, 900], {"broker-b": [17]})
    assert CommitBody.decode(body.encode()) == body
    assert CommitBody.decode(b"{}") == CommitBody()


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[1, 2]", b'{"chunks": [-1]}', b'{"chunks": ["5"]}', b'{"chunks": [true]}',
     b'{"remote": {"b": [1.5]}}', b'{"remote": [1]}'],
)  # fmt: skip
def test_commit_body_rejects_malformed_json(raw: bytes) -> None:
    with pytest.raises(RemoteProtocolError, match="commit body"):
        CommitBody.decode(raw)


def test_staging_headers_round_trip_through_ext_fields() -> None:
    stage = StageMessagesRequestHeader("PG", "T", 3, "query-1", 42, born_timestamp=7)
    assert StageMessagesRequestHeader.from_ext(stage.to_ext()) == stage
    assert stage.to_ext()["writeId"] == "query-1" and stage.to_ext()["batchId"] == "42"
    commit = CommitStagedRequestHeader("query-1", 42)
    assert CommitStagedRequestHeader.from_ext(commit.to_ext()) == commit
    with pytest.raises(RemoteProtocolError, match="batchId"):
        CommitStagedRequestHeader.from_ext({"writeId": "q"})
