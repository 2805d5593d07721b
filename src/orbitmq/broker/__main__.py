"""``orbitmq broker -c broker.conf [-n NAMESRV] [--listen-port N] [--bind-address A] ...``.

Also ``python -m orbitmq.broker``.

Parses the arguments into config overrides (defaults < file < flags), loads the config, sets
up logging to stderr and runs the broker until SIGINT or SIGTERM. Without ``storePathRootDir``
in the file or ``--store-dir``, the store lives in ``./store`` under the working directory.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from orbitmq.broker.app import BrokerApp
from orbitmq.broker.config import load_broker_config
from orbitmq.conf import LOG_LEVELS, load_properties
from orbitmq.errors import ConfigError
from orbitmq.transport.runner import run_app


def parse_args(
    argv: Sequence[str] | None, prog: str = "python -m orbitmq.broker", *, proxy_flags: bool = False
) -> argparse.Namespace:
    """The broker's flags; ``proxy_flags`` adds ``orbitmq broker``'s ``--enable-proxy`` and ``--grpc-port``."""
    parser = argparse.ArgumentParser(prog=prog, description="OrbitMQ broker")
    parser.add_argument("-c", "--config-file", help="a RocketMQ broker.conf (key=value lines)")
    parser.add_argument("-n", "--namesrv-addr", help="name servers, 'host:port;host:port' (namesrvAddr)")
    parser.add_argument("--listen-port", type=int, help="TCP port for clients (listenPort, default 10911)")
    parser.add_argument(
        "--bind-address",
        help="interface to listen on (bindAddress, default 0.0.0.0: every interface; 127.0.0.1: this host only)",
    )
    parser.add_argument("--store-dir", help="store root directory (storePathRootDir)")
    parser.add_argument("--broker-name", help="broker name (brokerName)")
    parser.add_argument("--broker-id", type=int, help="0 for a master (brokerId)")
    parser.add_argument("--broker-ip", help="client-facing IPv4 address (brokerIP1)")
    parser.add_argument("--flush", choices=("sync", "async"), help="flushDiskType SYNC_FLUSH or ASYNC_FLUSH")
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help="logging level (INFO)"
    )
    if proxy_flags:
        parser.add_argument(
            "--enable-proxy",
            action="store_true",
            help="also serve gRPC for RocketMQ 5.x clients in this process (the proxy's local mode)",
        )
        parser.add_argument(
            "--grpc-port", type=int, help="gRPC port with --enable-proxy (grpcServerPort, default 8081)"
        )
    args = parser.parse_args(argv)
    if proxy_flags and args.grpc_port is not None and not args.enable_proxy:
        parser.error("--grpc-port needs --enable-proxy")
    return args


def port_flags_of(args: argparse.Namespace) -> dict[int, str]:
    """The ports given by flags, each with its flag: a port in use is reported against it."""
    flags = {args.listen_port: "--listen-port", getattr(args, "grpc_port", None): "--grpc-port"}
    return {port: flag for port, flag in flags.items() if port}


def overrides_of(args: argparse.Namespace) -> dict[str, object]:
    """The config keys the flags set (defaults < file < flags)."""
    flags = {
        "namesrvAddr": args.namesrv_addr,
        "listenPort": args.listen_port,
        "bindAddress": args.bind_address,
        "storePathRootDir": args.store_dir,
        "brokerName": args.broker_name,
        "brokerId": args.broker_id,
        "brokerIP1": args.broker_ip,
        "flushDiskType": {"sync": "SYNC_FLUSH", "async": "ASYNC_FLUSH"}.get(args.flush or ""),
    }
    overrides: dict[str, object] = {key: value for key, value in flags.items() if value is not None}
    file_values = load_properties(args.config_file) if args.config_file else {}
    if "storePathRootDir" not in overrides and not file_values.get("storePathRootDir"):
        overrides["storePathRootDir"] = str(Path.cwd() / "store")
    return overrides


def main(argv: Sequence[str] | None = None, prog: str = "python -m orbitmq.broker") -> int:
    """Run a broker; returns the exit code (``prog`` names the command in ``--help``)."""
    return run(parse_args(argv, prog))


def run(args: argparse.Namespace) -> int:
    """Run a broker with parsed arguments; returns the exit code."""
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        broker_config, store_config = load_broker_config(args.config_file, overrides_of(args))
    except ConfigError as exc:
        print(f"orbitmq broker: {exc}", file=sys.stderr)
        return 2
    if problem := store_dir_problem(store_config.store_path_root_dir):
        print(f"orbitmq broker: {problem}", file=sys.stderr)
        return 2
    return run_app(BrokerApp(broker_config, store_config), port_flags_of(args))


def store_dir_problem(directory: str | Path) -> str | None:
    """Why the store directory cannot be created, naming how to choose another; None if it can."""
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        return (
            f"cannot create the store directory {directory}: {reason} "
            "(pass --store-dir, or set storePathRootDir in the -c file)"
        )
    return None


if __name__ == "__main__":
    sys.exit(main())
