"""A plain batch (protocol/batch.py) skips the send path's per-message property checks.

That is right only while its keys (UNIQ_KEY, TAGS, KEYS) are none of the keys those checks
read: delay level, transaction, timer, WAIT, the metrics' message type, the broker's stamps.
"""

from __future__ import annotations

from orbitmq.broker.handlers.send import _BATCH_CHECKED_KEYS_WITH_TIMER
from orbitmq.metrics.recorder import _TYPED_KEYS, message_type_of
from orbitmq.model.message import MessageConst
from orbitmq.protocol.batch import PLAIN_KEYS


def test_plain_keys_are_none_of_the_keys_the_send_path_checks_per_message() -> None:
    read_per_message = (
        _BATCH_CHECKED_KEYS_WITH_TIMER
        | _TYPED_KEYS
        | {
            MessageConst.WAIT_STORE_MSG_OK,
            MessageConst.CLUSTER,
            MessageConst.MSG_REGION,
            MessageConst.TRACE_SWITCH,
        }
    )
    assert set(PLAIN_KEYS).isdisjoint(read_per_message)
    assert set(PLAIN_KEYS) == {"UNIQ_KEY", "TAGS", "KEYS"}
    # The send path counts a plain batch as normal messages.
    assert message_type_of({"UNIQ_KEY": "u", "TAGS": "t", "KEYS": "k"}) == "normal"
