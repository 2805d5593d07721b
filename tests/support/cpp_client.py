"""Drive the real RocketMQ C++ client (PyPI ``rocketmq==0.4.4``) from a child process.

Integration tests run this file as a subprocess (``python -m tests.support.cpp_client``)
with HOME pointed at a temporary directory, so the client's logs and local offset files
stay out of the user's home and a crash inside the C++ library cannot take the test
runner down. Every event is printed as one JSON line on stdout:

    produce:  {"event": "sent", "seq": i, "status": "OK", "msg_id": ..., "offset": n}
    paced:    {"event": "sent" | "error", "seq": i, "t": unix seconds, ...} (never raises)
    consume:  {"event": "received", "topic", "tags", "keys", "body_hex", "msg_id", "queue_id",
               "queue_offset", "reconsume_times", "props": {...}}

The C++ API passes bodies as C strings, so test bodies must not contain NUL bytes. With
``--access-key``/``--secret-key`` the client signs its requests (``set_session_credentials``,
channel ``ALIYUN``), for brokers with ACL.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer  # type: ignore[import-untyped]
from rocketmq.ffi import MessageModel  # type: ignore[import-untyped]

_lock = threading.Lock()


def emit(event: dict[str, object]) -> None:
    with _lock:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def body_for(seq: int, size: int) -> bytes:
    """A deterministic body without NUL bytes that is not plain ASCII."""
    pattern = bytes(((seq * 7 + i) % 255) + 1 for i in range(size))
    return pattern


def build_message(args: argparse.Namespace, seq: int) -> Message:
    msg = Message(args.topic)
    if args.tags:
        msg.set_tags(args.tags)
    msg.set_keys(f"key-{seq} k{seq % 3}")
    msg.set_property("seq", str(seq))
    msg.set_property("origin", "cpp")
    msg.set_body(body_for(seq, args.size))
    if args.delay_level:
        msg.set_delay_time_level(args.delay_level)
    return msg


def send_sync_retry_client_race(producer: Producer, msg: Message, seq: int) -> object:
    """send_sync, retried once when the client loses its own transport-lock race.

    rocketmq-client-cpp 1.2.3 can fail a send with "No route info of this topic" although it
    holds the route: the heartbeat it starts when a route changes holds the transport mutex,
    and the send's GetTransport gives up after 3 ms (m_tcpTransportTryLockTimeout), on every
    one of its retries (its log says "GetTransport ... get timed_mutex timeout"). No byte
    reached a broker, so one retry cannot duplicate a message.
    """
    try:
        return producer.send_sync(msg)
    except Exception as exc:
        if "No route info" not in str(exc):
            raise
        emit({"event": "client_retry", "seq": seq, "error": str(exc)})
        time.sleep(1.0)
        return producer.send_sync(msg)


def set_credentials(client: Producer | PushConsumer, args: argparse.Namespace) -> None:
    if args.access_key:
        client.set_session_credentials(args.access_key, args.secret_key, "ALIYUN")


def produce_paced(producer: Producer, args: argparse.Namespace) -> int:
    """One sync send every ``--interval-ms`` for ``--count`` sends; failures are events, not exits."""
    for seq in range(args.count):
        started = time.monotonic()
        try:
            result = producer.send_sync(build_message(args, seq))
            emit({"event": "sent", "seq": seq, "t": time.time(), "status": result.status.name})
        except Exception as exc:
            emit({"event": "error", "seq": seq, "t": time.time(), "error": str(exc)[:300]})
        time.sleep(max(0.0, args.interval_ms / 1000 - (time.monotonic() - started)))
    return 0


def produce(args: argparse.Namespace) -> int:
    producer = Producer(args.group, timeout=args.timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    set_credentials(producer, args)
    producer.start()
    if args.mode == "paced":
        try:
            return produce_paced(producer, args)
        finally:
            producer.shutdown()
    failures = 0
    pending = threading.Semaphore(0)
    try:
        if args.mode == "batch":
            for start in range(0, args.count, args.batch_size):
                seqs = list(range(start, min(start + args.batch_size, args.count)))
                result = producer.send_batch([build_message(args, seq) for seq in seqs])
                for seq in seqs:
                    emit(
                        {
                            "event": "sent",
                            "seq": seq,
                            "status": result.status.name,
                            "msg_id": result.msg_id,
                            "offset": result.offset,
                        }
                    )
            return 0
        for seq in range(args.count):
            msg = build_message(args, seq)
            if args.mode == "sync":
                result = send_sync_retry_client_race(producer, msg, seq)
                emit(
                    {
                        "event": "sent",
                        "seq": seq,
                        "status": result.status.name,
                        "msg_id": result.msg_id,
                        "offset": result.offset,
                    }
                )
            elif args.mode == "orderly":
                result = producer.send_orderly(msg, seq % args.order_keys)
                emit(
                    {
                        "event": "sent",
                        "seq": seq,
                        "status": result.status.name,
                        "msg_id": result.msg_id,
                        "offset": result.offset,
                        "order_key": seq % args.order_keys,
                    }
                )
            elif args.mode == "oneway":
                producer.send_oneway(msg)
                emit({"event": "sent", "seq": seq, "status": "ONEWAY"})
            elif args.mode == "async":

                def on_success(result: object, seq: int = seq) -> None:
                    emit(
                        {
                            "event": "sent",
                            "seq": seq,
                            "status": result.status.name,  # type: ignore[attr-defined]
                            "msg_id": result.msg_id,
                            "offset": result.offset,
                        }
                    )  # type: ignore[attr-defined]
                    pending.release()

                def on_error(exc: Exception, seq: int = seq) -> None:
                    emit({"event": "error", "seq": seq, "error": str(exc)})
                    pending.release()

                producer.send_async(msg, on_success, on_error)
        if args.mode == "async":
            for _ in range(args.count):
                if not pending.acquire(timeout=30):
                    failures += 1
                    break
    finally:
        producer.shutdown()
    return 1 if failures else 0


def consume(args: argparse.Namespace) -> int:
    model = MessageModel.BROADCASTING if args.model == "broadcasting" else MessageModel.CLUSTERING
    consumer = PushConsumer(args.group, orderly=args.orderly, message_model=model)
    consumer.set_namesrv_addr(args.namesrv)
    set_credentials(consumer, args)
    consumer.set_instance_name(args.instance)
    consumer.set_thread_count(args.threads)
    stop = threading.Event()

    def on_message(msg: object) -> None:
        props = {}
        # uprop, color, n: the user properties the interop drivers add (tests/interop/messages.py).
        for key in ("seq", "origin", "UNIQ_KEY", "TAGS", "KEYS", "uprop", "color", "n"):
            value = msg.get_property(key)  # type: ignore[attr-defined]
            if value:
                props[key] = value.decode() if isinstance(value, bytes) else value
        tags = msg.tags  # type: ignore[attr-defined]
        keys = msg.keys  # type: ignore[attr-defined]
        emit(
            {
                "event": "received",
                "topic": msg.topic,  # type: ignore[attr-defined]
                "tags": tags.decode() if isinstance(tags, bytes) else tags,
                "keys": keys.decode() if isinstance(keys, bytes) else keys,
                "body_hex": bytes(msg.body).hex(),  # type: ignore[attr-defined]
                "msg_id": msg.id,  # type: ignore[attr-defined]
                "queue_id": msg.queue_id,  # type: ignore[attr-defined]
                "queue_offset": msg.queue_offset,  # type: ignore[attr-defined]
                "reconsume_times": msg.reconsume_times,  # type: ignore[attr-defined]
                "store_timestamp": msg.store_timestamp,  # type: ignore[attr-defined]
                "born_timestamp": msg.born_timestamp,  # type: ignore[attr-defined]
                "props": props,
            }
        )
        if args.sleep_ms:
            time.sleep(args.sleep_ms / 1000)  # a slow listener: the backlog lasts

    consumer.subscribe(args.topic, on_message, args.expression)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    consumer.start()
    emit({"event": "started"})
    deadline = time.monotonic() + args.duration_s
    while not stop.is_set() and time.monotonic() < deadline:
        time.sleep(0.05)
    consumer.shutdown()
    emit({"event": "stopped"})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cpp_client")
    sub = parser.add_subparsers(dest="command", required=True)
    prod = sub.add_parser("produce")
    prod.add_argument("--namesrv", required=True)
    prod.add_argument("--topic", required=True)
    prod.add_argument("--group", default="PG_CPP")
    prod.add_argument(
        "--mode", choices=["sync", "async", "oneway", "orderly", "batch", "paced"], default="sync"
    )
    prod.add_argument("--interval-ms", type=int, default=200, help="paced mode: time between sends")
    prod.add_argument("--count", type=int, default=10)
    prod.add_argument("--size", type=int, default=64)
    prod.add_argument("--tags", default="TagA")
    prod.add_argument("--batch-size", type=int, default=8)
    prod.add_argument("--order-keys", type=int, default=4)
    prod.add_argument("--delay-level", type=int, default=0)
    prod.add_argument("--timeout-ms", type=int, default=5000)
    cons = sub.add_parser("consume")
    cons.add_argument("--namesrv", required=True)
    cons.add_argument("--topic", required=True)
    cons.add_argument("--group", required=True)
    cons.add_argument("--expression", default="*")
    cons.add_argument("--model", choices=["clustering", "broadcasting"], default="clustering")
    cons.add_argument("--orderly", action="store_true")
    cons.add_argument("--instance", default="DEFAULT")
    cons.add_argument("--threads", type=int, default=2)
    cons.add_argument("--duration-s", type=float, default=60.0)
    cons.add_argument("--sleep-ms", type=int, default=0, help="pause after each message")
    for sub_parser in (prod, cons):
        sub_parser.add_argument("--access-key", help="ACL access key (set_session_credentials)")
        sub_parser.add_argument("--secret-key", help="ACL secret key")
    args = parser.parse_args(argv)
    return produce(args) if args.command == "produce" else consume(args)


if __name__ == "__main__":
    sys.exit(main())
