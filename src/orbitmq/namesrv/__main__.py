"""``orbitmq namesrv [-c FILE] [--listen-port N] [--bind-address A]`` (or ``python -m orbitmq.namesrv``).

Parses the arguments, loads the config (defaults < file < flags), sets up logging to stderr and
runs the name server until SIGINT or SIGTERM. RocketMQ's ``mqnamesrv`` takes ``-c`` the same way.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from orbitmq.conf import LOG_LEVELS
from orbitmq.errors import ConfigError
from orbitmq.namesrv.app import NamesrvApp
from orbitmq.namesrv.config import load_namesrv_configs
from orbitmq.transport.runner import run_app


def _parse_args(argv: Sequence[str] | None, prog: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description="OrbitMQ name server")
    parser.add_argument("-c", "--config-file", help="a RocketMQ-style namesrv.conf (key=value lines)")
    parser.add_argument("--listen-port", type=int, help="TCP port (config key listenPort, default 9876)")
    parser.add_argument("--bind-address", help="address to bind (config key bindAddress, default 0.0.0.0)")
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help="logging level (INFO)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, prog: str = "python -m orbitmq.namesrv") -> int:
    """Run a name server; returns the exit code (``prog`` names the command in ``--help``)."""
    args = _parse_args(argv, prog)
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    overrides: dict[str, object] = {}
    if args.listen_port is not None:
        overrides["listenPort"] = args.listen_port
    if args.bind_address is not None:
        overrides["bindAddress"] = args.bind_address
    try:
        config, controller = load_namesrv_configs(args.config_file, overrides)
    except ConfigError as exc:
        print(f"orbitmq namesrv: {exc}", file=sys.stderr)
        return 2
    return run_app(
        NamesrvApp(config, controller=controller),
        {args.listen_port: "--listen-port"} if args.listen_port else None,
    )


if __name__ == "__main__":
    sys.exit(main())
