"""``orbitmq store``: offline work on a closed store directory.

``import-rocketmq SRC DST`` copies a store RocketMQ's broker wrote into a new OrbitMQ store;
``export-rocketmq SRC DST`` the reverse (``orbitmq.store.rocketmq_move`` says what moves and
what does not). Exit codes: 0 done, 1 the move was refused (one line says why), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from orbitmq.store.rocketmq_move import StoreMoveError, export_rocketmq, import_rocketmq

_VERBS = {
    "import-rocketmq": ("imported", import_rocketmq, "copy a closed RocketMQ store into a new OrbitMQ store"),
    "export-rocketmq": ("exported", export_rocketmq, "copy a closed OrbitMQ store into a new RocketMQ store"),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="orbitmq store", description="Offline work on a closed store directory."
    )
    sub = parser.add_subparsers(dest="verb", required=True)
    for verb, (_, _, help_text) in _VERBS.items():
        verb_parser = sub.add_parser(verb, help=help_text, description=help_text)
        verb_parser.add_argument(
            "source", type=Path, help="the store root (holds commitlog/); its broker stopped"
        )
        verb_parser.add_argument("target", type=Path, help="a new directory (absent or empty)")
        verb_parser.add_argument(
            "--force", action="store_true", help="move a source the offline verifier finds inconsistent"
        )
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    done, move, _ = _VERBS[args.verb]
    try:
        report = move(args.source, args.target, force=args.force)
    except StoreMoveError as exc:
        print(f"orbitmq store {args.verb}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"orbitmq store {args.verb}: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(report.summary(done, args.source, args.target))
    return 0
