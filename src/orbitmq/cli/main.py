"""``orbitmq``: one command for every OrbitMQ program.

``namesrv``, ``broker``, ``admin``, ``cluster`` and ``bench`` hand their arguments to the program's own entry point;
``standalone`` is the main job: a nameserver and a broker in one process, on the default
ports, with an embedded data directory, the broker registered with that nameserver.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from orbitmq.errors import ConfigError

DEFAULT_DATA_DIR = ".orbitmq-data"
DEFAULT_NAMESRV_PORT = 9876
DEFAULT_BROKER_PORT = 10911

_FORWARDED = {
    "namesrv": "run a nameserver (python -m orbitmq.namesrv)",
    "broker": "run a broker (python -m orbitmq.broker)",
    "admin": "administer topics, groups and clusters (orbitmq admin --help)",
    "cluster": "a local cluster: a nameserver and masters with slaves (orbitmq cluster --help)",
    "bench": "benchmarks (python -m orbitmq.bench)",
}


def _standalone_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "standalone",
        help="a nameserver and a broker in one process",
        description="Run a nameserver and a broker in one process, the broker registered with it.",
    )
    parser.add_argument("-c", "--config-file", help="a RocketMQ broker.conf; flags override it")
    parser.add_argument(
        "--data-dir", default=DEFAULT_DATA_DIR, help=f"data directory (default ./{DEFAULT_DATA_DIR})"
    )
    parser.add_argument(
        "--namesrv-port", type=int, default=DEFAULT_NAMESRV_PORT, help="nameserver port (9876)"
    )
    parser.add_argument("--broker-port", type=int, default=DEFAULT_BROKER_PORT, help="broker port (10911)")
    parser.add_argument("--broker-ip", default="127.0.0.1", help="address clients use to reach the broker")
    parser.add_argument("--flush", choices=("sync", "async"), help="flushDiskType SYNC_FLUSH or ASYNC_FLUSH")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")


def run_standalone(args: argparse.Namespace) -> int:
    # Imported here so that `orbitmq bench ...` does not pay for the servers' imports.
    from orbitmq.broker.app import BrokerApp
    from orbitmq.broker.config import load_broker_config
    from orbitmq.namesrv.app import NamesrvApp
    from orbitmq.namesrv.config import load_namesrv_config
    from orbitmq.transport.runner import run_apps

    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    data_dir = Path(args.data_dir).resolve()
    overrides: dict[str, object] = {
        "namesrvAddr": f"127.0.0.1:{args.namesrv_port}",
        "listenPort": args.broker_port,
        "storePathRootDir": str(data_dir / "store"),
        "brokerIP1": args.broker_ip,
    }
    if args.flush:
        overrides["flushDiskType"] = "SYNC_FLUSH" if args.flush == "sync" else "ASYNC_FLUSH"
    try:
        namesrv_config = load_namesrv_config(None, {"listenPort": args.namesrv_port})
        broker_config, store_config = load_broker_config(args.config_file, overrides)
    except ConfigError as exc:
        print(f"orbitmq standalone: {exc}", file=sys.stderr)
        return 2
    data_dir.mkdir(parents=True, exist_ok=True)
    logging.getLogger("orbitmq").info(
        "standalone: nameserver 127.0.0.1:%d, broker %s:%d, data in %s",
        args.namesrv_port,
        args.broker_ip,
        args.broker_port,
        data_dir,
    )
    return run_apps([NamesrvApp(namesrv_config), BrokerApp(broker_config, store_config)])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``orbitmq`` command; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="orbitmq", description="OrbitMQ: RocketMQ's architecture in Python")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in _FORWARDED.items():
        sub.add_parser(name, help=help_text, add_help=False)
    _standalone_parser(sub)
    if argv and argv[0] in _FORWARDED:
        return _forward(argv[0], argv[1:])
    args = parser.parse_args(argv)
    return run_standalone(args)


def _forward(command: str, rest: list[str]) -> int:
    if command == "namesrv":
        from orbitmq.namesrv.__main__ import main as namesrv_main

        return namesrv_main(rest)
    if command == "broker":
        from orbitmq.broker.__main__ import main as broker_main

        return broker_main(rest)
    if command == "admin":
        from orbitmq.cli.admin import main as admin_main

        return admin_main(rest)
    if command == "cluster":
        from orbitmq.cli.cluster import main as cluster_main

        return cluster_main(rest)
    from orbitmq.bench.__main__ import main as bench_main

    return bench_main(rest)
