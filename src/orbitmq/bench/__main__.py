"""``python -m orbitmq.bench <subcommand> [options]``: run one benchmark.

The table below maps each subcommand to the module that implements it. A module is
imported only when its subcommand runs, so one benchmark's dependencies never slow down
or break another's start. Each module provides ``add_arguments(parser)`` and
``run(args) -> int`` (the exit status).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence

from orbitmq.bench._interrupt import INTERRUPTED_STATUS

# subcommand -> (module, one-line help). Add new benchmarks here.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "store": ("orbitmq.bench.store", "MessageStore append/flush/read throughput against the raw disk"),
    "latency": ("orbitmq.bench.latency", "end-to-end delivery latency: send -> long-polling consumer"),
    "produce": ("orbitmq.bench.produce", "producer TPS and round trips (single, concurrent, batch sends)"),
    "spark": ("orbitmq.bench.spark", "Spark source streaming read beside the plain pull consumer, same data"),
    "spark-write": (
        "orbitmq.bench.spark_write",
        "Spark sink: exactly-once writes beside at-least-once, same data",
    ),
    "consume": (
        "orbitmq.bench.consume",
        "consume throughput (msgs/s, MB/s) through the pull or push consumer",
    ),
    "filter": (
        "orbitmq.bench.filter",
        "SQL92 and TAG filtered pulls beside unfiltered pulls of the same messages (msgs/s)",
    ),
    "timer": ("orbitmq.bench.timer", "1M pending timed messages: put rate, memory, disk, delivery lateness"),
    "fuzz": ("orbitmq.bench.fuzz", "hostile frames against a broker and a name server; what survives"),
    "fuzz-http": ("orbitmq.bench.fuzz_http", "hostile HTTP requests against the dashboard; what survives"),
    "fuzz-grpc": ("orbitmq.bench.fuzz_grpc", "hostile calls on every RPC of the gRPC port; what survives"),
    "replication": (
        "orbitmq.bench.replication",
        "produce with no slave, ASYNC_MASTER and SYNC_MASTER; replication lag under load",
    ),
    "proxy": ("orbitmq.bench.proxy", "gRPC proxy send and receive+ack msgs/s beside the remoting port"),
    "acl": ("orbitmq.bench.acl", "producer throughput with ACL off and on, in one run"),
    "dashboard": ("orbitmq.bench.dashboard", "dashboard page load times over 1,000 topics and 500 groups"),
    "compare": (
        "orbitmq.bench.compare",
        "OrbitMQ beside Redis Streams through their Python clients: produce, consume, sync latency",
    ),
    "peers": (
        "orbitmq.bench.peers",
        "OrbitMQ beside Apache RocketMQ, Kafka and Redis: their own tools and the same client, one run",
    ),
    "namesrv": (
        "orbitmq.bench.namesrv",
        "route queries/s, CPU per query and registration rounds of one name server, simulated brokers",
    ),
    "metrics": ("orbitmq.bench.metrics", "produce msgs/s with the broker's /metrics on and off, one run"),
    "scaling": (
        "orbitmq.bench.scaling",
        "msgs/s and CPU against N broker processes (N = 1 .. cores), clients spread over them",
    ),
}

USAGE_ERROR_STATUS = 2


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, except "none" and off switches (their help says what happens)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False):
            return action.help
        return super()._get_help_string(action)


def _usage(prog: str) -> str:
    lines = [f"usage: {prog} SUBCOMMAND [options]", "", "subcommands:"]
    lines += [f"  {name:<12} {help_text}" for name, (_, help_text) in SUBCOMMANDS.items()]
    lines.append("")
    lines.append(f"Run '{prog} SUBCOMMAND --help' for its options (defaults shown there).")
    return "\n".join(lines)


def main(
    argv: Sequence[str] | None = None,
    prog: str = "python -m orbitmq.bench",
    credentials: tuple[str, str] | None = None,
) -> int:
    """Run the benchmark named by the first argument; returns its exit status (2 on usage errors).

    ``prog`` is how the command is named in help and usage lines. ``credentials`` (access key,
    secret key) stand in for ``--access-key`` / ``--secret-key`` when neither is given, for
    benchmarks that take them (``orbitmq bench`` passes the environment's); they are applied
    after parsing, so ``--help`` never prints them.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in ("-h", "--help"):
        print(_usage(prog))
        return 0 if arguments else USAGE_ERROR_STATUS
    name = arguments[0]
    if name not in SUBCOMMANDS:
        print(f"unknown subcommand {name!r}\n\n{_usage(prog)}", file=sys.stderr)
        return USAGE_ERROR_STATUS
    module_name, help_text = SUBCOMMANDS[name]
    module = importlib.import_module(module_name)
    # Every option's default is printed in --help, so a run's settings are never a guess.
    parser = argparse.ArgumentParser(
        prog=f"{prog} {name}", description=help_text, formatter_class=_DefaultsFormatter
    )
    module.add_arguments(parser)
    args = parser.parse_args(arguments[1:])
    if credentials is not None and hasattr(args, "access_key") and not (args.access_key or args.secret_key):
        args.access_key, args.secret_key = credentials
    started = time.monotonic()
    try:
        status: int = module.run(args)
    except KeyboardInterrupt:
        # A second Ctrl-C (the first asks the benchmark to stop and summarise), or one where
        # the benchmark does not catch it: the clean-up blocks have run, no traceback.
        print(
            f"{prog} {name}: interrupted after {time.monotonic() - started:.1f} s, before its results",
            file=sys.stderr,
        )
        return INTERRUPTED_STATUS
    return status


if __name__ == "__main__":
    sys.exit(main())
