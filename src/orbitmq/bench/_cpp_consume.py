"""Child process of ``bench consume --compare-defaults``: the real RocketMQ C++ PushConsumer.

Run as ``python -m orbitmq.bench._cpp_consume --namesrv ... --topic ... --group ... --count N``
(the parent sets HOME to a temporary directory: the client writes its logs there). The
consumer keeps every default of the C++ client (pull batches of 32, one message per callback,
its own thread count, a new group starting where the broker says); the callback only counts.
When ``--count`` messages have arrived, or after ``--timeout-s``, one JSON line is printed:
``{"count": n, "started": t, "first": t, "last": t, "cpu_s": s}``: ``time.monotonic()`` seconds,
and the CPU seconds this process spent until the last message (start-up included).
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import sys
import threading
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orbitmq.bench._cpp_consume")
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--timeout-s", type=float, default=60.0)
    args = parser.parse_args(argv)
    from rocketmq.client import PushConsumer

    started = time.monotonic()
    received = itertools.count(1)  # next() is atomic under the GIL: the callback threads share it
    times = {"first": 0.0, "last": 0.0}
    done = threading.Event()

    def on_message(_message: object) -> None:
        seen = next(received)
        now = time.monotonic()
        if seen == 1:
            times["first"] = now
        if seen >= args.count and not done.is_set():
            times["last"] = now
            done.set()

    consumer = PushConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.subscribe(args.topic, on_message)
    consumer.start()
    finished = done.wait(args.timeout_s)
    count = args.count if finished else next(received) - 1
    if not finished:
        times["last"] = time.monotonic()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    consumer.shutdown()
    cpu_s = usage.ru_utime + usage.ru_stime
    print(json.dumps({"count": count, "started": started, "cpu_s": cpu_s, **times}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
