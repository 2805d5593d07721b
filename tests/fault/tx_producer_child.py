"""A TransactionProducer process that leaves its transactions undecided, then waits to be killed.

``python -m tests.fault.tx_producer_child NAMESRV GROUP TOPIC COUNT`` sends COUNT transactional
messages with OrbitMQ's own :class:`TransactionProducer`; each local transaction answers
UNKNOWN (the decision is "not yet"), and so would its checker. It prints one JSON line,
``{"sent": [[msg_id, broker_name], ...]}``, and sleeps until SIGKILLed: only another producer
of the group can settle the transactions then.
"""

from __future__ import annotations

import asyncio
import json
import sys

from orbitmq.client import LocalTransactionState, Message, TransactionProducer


async def main(namesrv: str, group: str, topic: str, count: int) -> int:
    async def undecided(*_: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOWN

    producer = TransactionProducer(
        group, namesrv, execute_local_transaction=undecided, check_local_transaction=undecided
    )
    await producer.start()
    sent = []
    for index in range(count):
        result = await producer.send_message_in_transaction(Message(topic, b"undecided %d" % index))
        sent.append([result.msg_id, result.send_result.message_queue.broker_name])
    print(json.dumps({"sent": sent}), flush=True)
    await asyncio.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))))
