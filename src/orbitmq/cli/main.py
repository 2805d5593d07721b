"""``orbitmq``: one command for every OrbitMQ program.

``namesrv``, ``proxy``, ``admin``, ``cluster`` and ``bench`` hand their arguments to the program's own entry point;
``broker`` does too, unless ``--enable-proxy`` asks for the gRPC proxy beside it (local mode,
as RocketMQ's ``mqbroker --enable-proxy``); ``standalone`` is the main job: a nameserver, a
broker and the gRPC proxy in one process, on the default ports, with an embedded data
directory, the broker registered with that nameserver. This module is where the servers are
put together in one process, so it sits above all of them in the import layers.
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
DEFAULT_GRPC_PORT = 8081

_FORWARDED = {
    "namesrv": "run a nameserver (python -m orbitmq.namesrv)",
    "broker": "run a broker (python -m orbitmq.broker); --enable-proxy adds the gRPC proxy",
    "controller": "run a controller of controller mode (python -m orbitmq.controller)",
    "proxy": "run the gRPC proxy for RocketMQ 5.x clients (python -m orbitmq.proxy)",
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
    parser.add_argument(
        "--grpc-port", type=int, default=DEFAULT_GRPC_PORT, help="gRPC port for RocketMQ 5.x clients (8081)"
    )
    parser.add_argument("--no-proxy", action="store_true", help="do not serve gRPC (RocketMQ 5.x clients)")
    parser.add_argument("--flush", choices=("sync", "async"), help="flushDiskType SYNC_FLUSH or ASYNC_FLUSH")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")


def run_standalone(args: argparse.Namespace) -> int:
    # Imported here so that `orbitmq bench ...` does not pay for the servers' imports.
    from orbitmq.broker.app import BrokerApp
    from orbitmq.broker.config import load_broker_configs
    from orbitmq.namesrv.app import NamesrvApp
    from orbitmq.namesrv.config import load_namesrv_config
    from orbitmq.proxy import ProxyApp, ProxyConfig
    from orbitmq.transport.runner import App, run_apps

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
    if not args.no_proxy:
        overrides["grpcServerPort"] = args.grpc_port
    try:
        namesrv_config = load_namesrv_config(None, {"listenPort": args.namesrv_port})
        broker_config, store_config, proxy_config = load_broker_configs(
            args.config_file, overrides, (ProxyConfig,)
        )
    except ConfigError as exc:
        print(f"orbitmq standalone: {exc}", file=sys.stderr)
        return 2
    data_dir.mkdir(parents=True, exist_ok=True)
    logging.getLogger("orbitmq").info(
        "standalone: nameserver 127.0.0.1:%d, broker %s:%d, gRPC %s, data in %s",
        args.namesrv_port,
        args.broker_ip,
        args.broker_port,
        "off" if args.no_proxy else proxy_config.grpc_server_port,
        data_dir,
    )
    apps: list[App] = [NamesrvApp(namesrv_config), BrokerApp(broker_config, store_config)]
    if not args.no_proxy:
        apps.append(ProxyApp(proxy_config))
    return run_apps(apps)


def run_broker_with_proxy(rest: list[str]) -> int:
    """``orbitmq broker --enable-proxy [--grpc-port N] ...``: a broker and its local gRPC proxy."""
    from orbitmq.broker.__main__ import overrides_of, parse_args
    from orbitmq.broker.app import BrokerApp
    from orbitmq.broker.config import load_broker_configs
    from orbitmq.proxy import ProxyApp, ProxyConfig
    from orbitmq.transport.runner import run_apps

    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--enable-proxy", action="store_true")
    extra.add_argument("--grpc-port", type=int)
    proxy_args, broker_argv = extra.parse_known_args(rest)
    args = parse_args(broker_argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    overrides = overrides_of(args)
    if proxy_args.grpc_port is not None:
        overrides["grpcServerPort"] = proxy_args.grpc_port
    try:
        broker_config, store_config, proxy_config = load_broker_configs(
            args.config_file, overrides, (ProxyConfig,)
        )
        if not proxy_config.namesrv_addr:
            raise ConfigError("--enable-proxy needs namesrvAddr: the proxy reads routes from name servers")
    except ConfigError as exc:
        print(f"orbitmq broker: {exc}", file=sys.stderr)
        return 2
    return run_apps([BrokerApp(broker_config, store_config), ProxyApp(proxy_config)])


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
        if "--enable-proxy" in rest:
            return run_broker_with_proxy(rest)
        from orbitmq.broker.__main__ import main as broker_main

        return broker_main(rest)
    if command == "controller":
        from orbitmq.controller.__main__ import main as controller_main

        return controller_main(rest)
    if command == "proxy":
        from orbitmq.proxy.__main__ import main as proxy_main

        return proxy_main(rest)
    if command == "admin":
        from orbitmq.cli.admin import main as admin_main

        return admin_main(rest)
    if command == "cluster":
        from orbitmq.cli.cluster import main as cluster_main

        return cluster_main(rest)
    from orbitmq.bench.__main__ import main as bench_main

    return bench_main(rest)
