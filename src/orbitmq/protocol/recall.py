"""The recall handle of a timed message (RocketMQ's RecallMessageHandle v1), sans-IO.

A send of a timed message answers with a handle that names it; RECALL_MESSAGE (370) with that
handle cancels the message before it is due. The handle is URL-safe base64 of five fields
separated by spaces::

    v1 <topic> <brokerName> <due time, epoch ms> <message id (UNIQ_KEY)>
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from orbitmq.errors import RemoteProtocolError

__all__ = ["RecallHandle"]


@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str
    due_ms: int
    message_id: str

    def encode(self) -> str:
        raw = f"v1 {self.topic} {self.broker_name} {self.due_ms} {self.message_id}"
        return base64.urlsafe_b64encode(raw.encode()).decode()

    @classmethod
    def decode(cls, text: str) -> RecallHandle:
        """Parse a handle.

        Raises:
            RemoteProtocolError: not base64 of a v1 handle with a numeric due time.
        """
        try:
            raw = base64.urlsafe_b64decode(text.encode()).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
            raise RemoteProtocolError("recall handle is invalid: not base64") from exc
        parts = raw.split(" ")
        due = parts[3] if len(parts) >= 5 else ""
        if parts[0] != "v1" or not (0 < len(due) <= 19 and due.isascii() and due.isdigit()):
            raise RemoteProtocolError("recall handle is invalid")
        return cls(parts[1], parts[2], int(parts[3]), parts[4])
