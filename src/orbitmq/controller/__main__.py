"""``orbitmq controller -c controller.conf [--listen-port N]``: one standalone controller.

RocketMQ's ``mqcontroller`` takes ``-c`` the same way. Three controllers, each with the same
``controllerDLegerPeers`` and its own ``controllerDLegerSelfId``, make a quorum.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from orbitmq.conf import LOG_LEVELS
from orbitmq.controller.app import ControllerApp
from orbitmq.controller.config import load_controller_config
from orbitmq.errors import ConfigError
from orbitmq.transport.runner import run_app


def main(argv: Sequence[str] | None = None) -> int:
    """Run a controller; returns the exit code."""
    parser = argparse.ArgumentParser(prog="orbitmq controller", description="OrbitMQ controller")
    parser.add_argument("-c", "--config-file", help="a RocketMQ-style controller.conf (key=value lines)")
    parser.add_argument("--listen-port", type=int, help="remoting port (config key listenPort, default 9878)")
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help="logging level (INFO)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    overrides: dict[str, object] = {}
    if args.listen_port is not None:
        overrides["listenPort"] = args.listen_port
    try:
        config = load_controller_config(args.config_file, overrides)
    except ConfigError as exc:
        print(f"orbitmq controller: {exc}", file=sys.stderr)
        return 2
    return run_app(ControllerApp(config), {args.listen_port: "--listen-port"} if args.listen_port else None)


if __name__ == "__main__":
    sys.exit(main())
