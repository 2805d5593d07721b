"""``python -m orbitmq.proxy [-c proxy.conf] [-n NAMESRV] [--grpc-port N]``: the proxy in cluster mode.

A process of its own that serves RocketMQ 5.x SDKs over gRPC and talks to the name servers
and brokers as a client does. Parses the arguments into config overrides (defaults < file <
flags), sets up logging to stderr and runs the proxy until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from orbitmq.conf import LOG_LEVELS
from orbitmq.errors import ConfigError
from orbitmq.proxy.app import ProxyApp
from orbitmq.proxy.config import load_proxy_configs
from orbitmq.transport.runner import run_app


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="orbitmq proxy", description="OrbitMQ gRPC proxy (cluster mode)")
    parser.add_argument(
        "-c", "--config-file", help="a proxy.conf (key=value lines, RocketMQ proxy key names)"
    )
    parser.add_argument("-n", "--namesrv-addr", help="name servers, 'host:port;host:port' (namesrvAddr)")
    parser.add_argument("--grpc-port", type=int, help="gRPC port (grpcServerPort, default 8081)")
    parser.add_argument(
        "--bind-address", help="interface the gRPC port binds (grpcBindAddress, default 0.0.0.0)"
    )
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help="logging level (INFO)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a proxy; returns the exit code."""
    args = _parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    flags = {
        "namesrvAddr": args.namesrv_addr,
        "grpcServerPort": args.grpc_port,
        "grpcBindAddress": args.bind_address,
    }
    try:
        config, tls = load_proxy_configs(args.config_file, {k: v for k, v in flags.items() if v is not None})
    except ConfigError as exc:
        print(f"orbitmq proxy: {exc}", file=sys.stderr)
        return 2
    return run_app(ProxyApp(config, tls=tls), {args.grpc_port: "--grpc-port"} if args.grpc_port else None)


if __name__ == "__main__":
    sys.exit(main())
