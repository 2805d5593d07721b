"""``--access-key`` / ``--secret-key`` for benchmarks that run against a cluster with ACL.

``orbitmq bench ...`` fills them from ``ORBITMQ_ACCESS_KEY`` / ``ORBITMQ_SECRET_KEY`` when
they are not given (the ``orbitmq`` command reads the environment, not this package).
"""

from __future__ import annotations

import argparse
from typing import Any

from orbitmq.acl.signature import Credentials
from orbitmq.transport.connection import RequestSigner

__all__ = ["add_credential_arguments", "client_options", "request_signer"]


def add_credential_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--access-key", help="ACL access key (with --namesrv on a cluster with ACL)")
    parser.add_argument("--secret-key", help="ACL secret key (orbitmq bench: default $ORBITMQ_SECRET_KEY)")


def _credentials(args: argparse.Namespace) -> Credentials | None:
    if bool(args.access_key) != bool(args.secret_key):
        raise SystemExit("give both --access-key and --secret-key, or neither")
    return Credentials(args.access_key, args.secret_key) if args.access_key else None


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword options for producers, consumers and admin clients."""
    credentials = _credentials(args)
    if credentials is None:
        return {}
    return {"access_key": credentials.access_key, "secret_key": credentials.secret_key}


def request_signer(args: argparse.Namespace) -> RequestSigner | None:
    """A signer for the benchmarks' raw ``RemotingClient`` requests."""
    credentials = _credentials(args)
    return credentials.sign if credentials is not None else None
