"""Drive the official RocketMQ 5.x Python SDK (PyPI ``rocketmq-python-client``) from a child process.

This file runs with the SDK's own virtual environment (``tests/support/sdk5.py`` builds it):
the SDK imports as ``rocketmq``, like the C++ 4.x client in the main environment, so the two
never share a process. It imports nothing of OrbitMQ. HOME points at a temporary directory
(the SDK writes its logs under ``~/logs``). Every event is one JSON line on stdout:

    produce:      {"event": "sent", "seq", "message_id", "offset", "recall_handle"}
    transaction:  {"event": "sent" ...}, {"event": "ended", "decision"}, {"event": "checked", "message_id"}
    simple/push:  {"event": "received", "seq", "message_id", "topic", "tag", "keys", "group",
                   "attempt", "body_hex", "props"} and {"event": "acked" | "ack_failed" | ...}
    recall:       {"event": "sent" ...}, {"event": "recalled", "message_id"}

Bodies are ``body_for(seq, size)``, the C++ driver's pattern, so tests compare bytes. ACL
credentials, when a test sets them, come from ``SDK5_ACCESS_KEY`` / ``SDK5_SECRET_KEY``;
``SDK5_TLS=1`` turns the SDK's TLS on (grpc then trusts ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

from rocketmq import (  # type: ignore[import-not-found]
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq.grpc_protocol import FilterType  # type: ignore[import-not-found]

_lock = threading.Lock()
TLS = os.environ.get("SDK5_TLS") == "1"
_stop = threading.Event()


def emit(event: dict[str, object]) -> None:
    with _lock:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def body_for(seq: int, size: int) -> bytes:
    """The C++ driver's deterministic, non-ASCII, NUL-free body."""
    return bytes(((seq * 7 + i) % 255) + 1 for i in range(size))


def config(args: argparse.Namespace) -> object:
    # ACL credentials come from the environment, never the command line.
    credentials = Credentials(os.environ.get("SDK5_ACCESS_KEY", ""), os.environ.get("SDK5_SECRET_KEY", ""))
    return ClientConfiguration(args.endpoint, credentials, request_timeout=args.request_timeout)


def build(args: argparse.Namespace, seq: int) -> object:
    message = Message()
    message.topic = args.topic
    message.body = body_for(seq, args.size)
    if args.tag:
        message.tag = args.tag
    message.keys = f"key-{seq}"
    message.add_property("seq", str(seq))
    message.add_property("origin", "sdk5")
    return message


def received(message: object, seq_hint: int | None = None) -> dict[str, object]:
    props = dict(message.properties)  # type: ignore[attr-defined]
    return {
        "event": "received",
        "seq": int(props.get("seq", -1)) if seq_hint is None else seq_hint,
        "message_id": message.message_id,  # type: ignore[attr-defined]
        "topic": message.topic,  # type: ignore[attr-defined]
        "tag": message.tag,  # type: ignore[attr-defined]
        "keys": sorted(message.keys),  # type: ignore[attr-defined]
        "group": message.message_group,  # type: ignore[attr-defined]
        "attempt": message.delivery_attempt,  # type: ignore[attr-defined]
        "body_hex": bytes(message.body).hex(),  # type: ignore[attr-defined]
        "props": props,
        "corrupted": message.corrupted,  # type: ignore[attr-defined]
        "type": int(message.message_type),  # type: ignore[attr-defined]
        "at_ms": int(time.time() * 1000),
    }


def error_event(kind: str, exc: Exception, **extra: object) -> dict[str, object]:
    return {"event": kind, "code": getattr(exc, "code", None), "error": str(exc)[:300], **extra}


# -- producers ---------------------------------------------------------------------------------------


def produce(args: argparse.Namespace) -> int:
    producer = Producer(config(args), (args.topic,), tls_enable=TLS)
    producer.startup()
    try:
        futures = []
        for seq in range(args.seq_start, args.seq_start + args.count):
            message = build(args, seq)
            if args.mode == "fifo":
                message.message_group = f"group-{seq % args.groups}"
            elif args.mode == "delay":
                # The Python SDK copies delivery_timestamp into Timestamp.seconds: epoch seconds.
                message.delivery_timestamp = int(time.time()) + args.delay_s
            if args.mode == "async":
                futures.append((seq, message, producer.send_async(message)))
                continue
            receipt = producer.send(message)
            emit(_sent(seq, receipt, message))
        for seq, message, future in futures:
            emit(_sent(seq, future.result(timeout=30), message))
    finally:
        producer.shutdown()
    return 0


def _sent(seq: int, receipt: object, message: object) -> dict[str, object]:
    return {
        "event": "sent",
        "seq": seq,
        "message_id": receipt.message_id,  # type: ignore[attr-defined]
        "offset": receipt.offset,  # type: ignore[attr-defined]
        "transaction_id": receipt.transaction_id,  # type: ignore[attr-defined]
        "recall_handle": getattr(receipt, "recall_handle", None),
        "group": message.message_group,  # type: ignore[attr-defined]
        "at_ms": int(time.time() * 1000),
    }


class _Checker(TransactionChecker):  # type: ignore[misc]
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.checked = threading.Event()

    def check(self, message: object) -> object:
        emit({"event": "checked", "message_id": message.message_id, "body_hex": bytes(message.body).hex()})  # type: ignore[attr-defined]
        self.checked.set()
        return TransactionResolution.COMMIT if self.answer == "commit" else TransactionResolution.ROLLBACK


def transaction(args: argparse.Namespace) -> int:
    checker = _Checker(args.check_answer)
    producer = Producer(config(args), (args.topic,), checker, tls_enable=TLS)
    producer.startup()
    try:
        for seq, decision in enumerate(args.decisions.split(",")):
            tx = producer.begin_transaction()
            message = build(args, seq)
            message.add_property("decision", decision)
            receipt = producer.send(message, tx)
            emit(_sent(seq, receipt, message))
            if decision == "commit":
                tx.commit()
            elif decision == "rollback":
                tx.rollback()
            emit({"event": "ended", "seq": seq, "decision": decision})
        if "orphan" in args.decisions:
            if not checker.checked.wait(args.wait_s):
                emit({"event": "no_check"})
                return 1
            time.sleep(1.0)  # the checker's EndTransaction goes out after check() returns
    finally:
        producer.shutdown()
    return 0


def recall(args: argparse.Namespace) -> int:
    producer = Producer(config(args), (args.topic,), tls_enable=TLS)
    producer.startup()
    try:
        message = build(args, 0)
        message.delivery_timestamp = int(time.time()) + args.delay_s
        receipt = producer.send(message)
        emit(_sent(0, receipt, message))
        recalled = producer.recall_message(args.topic, receipt.recall_handle)
        emit({"event": "recalled", "message_id": recalled})
    finally:
        producer.shutdown()
    return 0


# -- consumers ---------------------------------------------------------------------------------------


def _filter(args: argparse.Namespace) -> object:
    kind = FilterType.SQL if args.filter_type == "sql92" else FilterType.TAG
    return FilterExpression(args.filter, kind)


def simple(args: argparse.Namespace) -> int:
    consumer = SimpleConsumer(
        config(args), args.group, {args.topic: _filter(args)}, await_duration=args.await_s, tls_enable=TLS
    )
    consumer.startup()
    deadline = time.monotonic() + args.max_wait_s
    got = 0
    try:
        while got < args.count and time.monotonic() < deadline and not _stop.is_set():
            batch = consumer.receive(args.batch, args.invisible_s)
            if not batch and got and args.stop_when_empty:
                break
            for message in batch:
                got += 1
                emit(received(message))
                _settle(consumer, message, args)
    finally:
        consumer.shutdown()
    emit({"event": "done", "received": got})
    return 0


def _settle(consumer: object, message: object, args: argparse.Namespace) -> None:
    try:
        if args.change_s is not None:
            consumer.change_invisible_duration(message, args.change_s)  # type: ignore[attr-defined]
            emit({"event": "changed", "message_id": message.message_id})  # type: ignore[attr-defined]
        if args.settle == "nack":
            return  # the change above was the nack: the message comes back after it
        if args.settle == "hold":
            return
        if args.ack_after_s:
            time.sleep(args.ack_after_s)
        consumer.ack(message)  # type: ignore[attr-defined]
        emit({"event": "acked", "message_id": message.message_id})  # type: ignore[attr-defined]
    except Exception as exc:
        emit(error_event("settle_failed", exc, message_id=message.message_id))  # type: ignore[attr-defined]


class _Listener(MessageListener):  # type: ignore[misc]
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.count = 0
        self.done = threading.Event()
        self.calls: dict[str, int] = {}

    def consume(self, message: object) -> object:
        emit(received(message))
        if self.args.sleep_s:
            time.sleep(self.args.sleep_s)
        message_id = message.message_id  # type: ignore[attr-defined]
        self.calls[message_id] = self.calls.get(message_id, 0) + 1
        if self.calls[message_id] <= self.args.fail_times:
            return ConsumeResult.FAILURE
        self.count += 1
        if self.args.stop_after and self.count >= self.args.stop_after:
            self.done.set()
        return ConsumeResult.SUCCESS


def push(args: argparse.Namespace) -> int:
    listener = _Listener(args)
    consumer = PushConsumer(config(args), args.group, listener, {args.topic: _filter(args)}, tls_enable=TLS)
    consumer.startup()
    emit({"event": "started"})
    try:
        deadline = time.monotonic() + args.max_wait_s
        while not listener.done.is_set() and not _stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(args.linger_s)  # let the last acks go out
    finally:
        consumer.shutdown()
    emit({"event": "done", "consumed": listener.count})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("produce", "transaction", "recall", "simple", "push"))
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", default="CG_SDK5")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--seq-start", type=int, default=0)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--tag", default="")
    parser.add_argument("--mode", choices=("sync", "async", "fifo", "delay"), default="sync")
    parser.add_argument("--groups", type=int, default=2, help="message groups of a FIFO produce")
    parser.add_argument("--delay-s", type=int, default=2)
    parser.add_argument("--decisions", default="commit", help="per half message: commit, rollback or orphan")
    parser.add_argument("--check-answer", default="commit", choices=("commit", "rollback"))
    parser.add_argument("--wait-s", type=float, default=30.0)
    parser.add_argument("--filter", default="*")
    parser.add_argument("--filter-type", choices=("tag", "sql92"), default="tag")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--invisible-s", type=int, default=15)
    parser.add_argument("--await-s", type=int, default=5)
    parser.add_argument("--change-s", type=int)
    parser.add_argument("--settle", choices=("ack", "nack", "hold"), default="ack")
    parser.add_argument("--ack-after-s", type=float, default=0.0)
    parser.add_argument("--max-wait-s", type=float, default=30.0)
    parser.add_argument("--stop-when-empty", action="store_true", help="simple: stop at an empty receive")
    parser.add_argument("--fail-times", type=int, default=0, help="push: fail the first N calls per message")
    parser.add_argument("--sleep-s", type=float, default=0.0, help="push: time the listener takes")
    parser.add_argument("--stop-after", type=int, default=0, help="push: stop after this many successes")
    parser.add_argument("--linger-s", type=float, default=0.5)
    parser.add_argument("--request-timeout", type=int, default=3)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: _stop.set())
    commands = {
        "produce": produce,
        "transaction": transaction,
        "recall": recall,
        "simple": simple,
        "push": push,
    }
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
