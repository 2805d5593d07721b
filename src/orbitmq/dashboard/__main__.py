"""``orbitmq dashboard --namesrv HOST:PORT [--port 8080] [--host 127.0.0.1]``: serve the dashboard."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence

from orbitmq.conf import LOG_LEVELS

DEFAULT_PORT = 8080


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orbitmq dashboard", description="A web dashboard for an OrbitMQ cluster."
    )
    parser.add_argument(
        "-n", "--namesrv", default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
        help="name servers host:port;host:port (default $NAMESRV_ADDR, else 127.0.0.1:9876)",
    )  # fmt: skip
    parser.add_argument(
        "--other-namesrv", action="append", default=[], metavar="HOST:PORT",
        help="another cluster's name servers the ops page may switch to (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"HTTP port ({DEFAULT_PORT}; 0 = any free port)"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="interface to bind (127.0.0.1: this machine only)"
    )
    parser.add_argument(
        "--auth", default=os.environ.get("ORBITMQ_DASHBOARD_AUTH"),
        help="USER:PASSWORD asked for every page (default $ORBITMQ_DASHBOARD_AUTH; none = no login)",
    )  # fmt: skip
    parser.add_argument(
        "--access-key", default=os.environ.get("ORBITMQ_ACCESS_KEY"),
        help="ACL access key for the cluster's brokers (default $ORBITMQ_ACCESS_KEY)",
    )  # fmt: skip
    parser.add_argument(
        "--secret-key", default=os.environ.get("ORBITMQ_SECRET_KEY"),
        help="ACL secret key (default $ORBITMQ_SECRET_KEY)",
    )  # fmt: skip
    parser.add_argument(
        "--sample-interval-s", type=float, default=10.0, help="seconds between chart samples (10)"
    )
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help="logging level (INFO)"
    )
    return parser


class _OncePerInterval(logging.Filter):
    """Lets a record starting with ``prefix`` through at most once per ``interval_s``."""

    def __init__(self, prefix: str, interval_s: float = 10.0) -> None:
        super().__init__()
        self.prefix, self.interval_s = prefix, interval_s
        self._passed_at = -interval_s

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(self.prefix):
            return True
        now = time.monotonic()
        if now - self._passed_at < self.interval_s:
            return False
        self._passed_at = now
        return True


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until interrupted; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.auth is not None and ":" not in args.auth:
        print("orbitmq dashboard: --auth must be USER:PASSWORD", file=sys.stderr)
        return 2
    if bool(args.access_key) != bool(args.secret_key):
        print("orbitmq dashboard: --access-key and --secret-key go together", file=sys.stderr)
        return 2
    if args.access_key and not args.auth:
        # Whoever reaches the pages acts on the cluster with these credentials.
        print(
            "orbitmq dashboard: with ACL credentials the dashboard requires a login: add --auth USER:PASSWORD",
            file=sys.stderr,
        )
        return 2
    try:
        import uvicorn

        from orbitmq.dashboard import DashboardConfig, create_app
    except ImportError as exc:
        print(f"orbitmq dashboard: {exc.name} is missing: pip install 'orbitmq[dashboard]'", file=sys.stderr)
        return 2
    config = DashboardConfig(
        args.namesrv,
        sample_interval_s=args.sample_interval_s,
        auth=args.auth,
        access_key=args.access_key,
        secret_key=args.secret_key,
        other_namesrv_addrs=tuple(args.other_namesrv),
    )
    app = create_app(config)
    # uvicorn logs every malformed request ("Invalid HTTP request received."): keep one a while.
    logging.getLogger("uvicorn.error").addFilter(_OncePerInterval("Invalid HTTP request"))
    # uvicorn logs "Uvicorn running on http://HOST:PORT" with the bound port (also with --port 0).
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower(), access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
