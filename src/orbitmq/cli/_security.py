"""Credential and TLS options shared by the commands that act as clients (admin, bench).

The environment variables ``ORBITMQ_ACCESS_KEY`` / ``ORBITMQ_SECRET_KEY`` stand in for
``--access-key`` / ``--secret-key``: they keep the secret off the command line, where other
users of the machine can read it. No command prints a secret.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from orbitmq.errors import ConfigError

__all__ = ["ACCESS_KEY_ENV", "SECRET_KEY_ENV", "add_security_arguments", "security_options"]

ACCESS_KEY_ENV = "ORBITMQ_ACCESS_KEY"
SECRET_KEY_ENV = "ORBITMQ_SECRET_KEY"


def add_security_arguments(parser: argparse.ArgumentParser) -> None:
    """``--access-key``, ``--secret-key``, ``--tls``, ``--tls-trust-cert``, ``--tls-no-verify``."""
    parser.add_argument("--access-key", help=f"ACL access key (default ${ACCESS_KEY_ENV})")
    parser.add_argument(
        "--secret-key", help=f"ACL secret key (default ${SECRET_KEY_ENV}; prefer the variable)"
    )
    parser.add_argument("--tls", action="store_true", help="connect over TLS")
    parser.add_argument("--tls-trust-cert", metavar="PEM", help="CA certificates to verify servers with")
    parser.add_argument(
        "--tls-no-verify", action="store_true", help="do not verify the servers' certificates"
    )


def security_options(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, object]:
    """Client keyword options (``access_key``, ``secret_key``, ``tls_*``) from flags and ``environ``.

    Raises:
        ConfigError: only one of the two keys is known.
    """
    access_key = args.access_key or environ.get(ACCESS_KEY_ENV) or None
    secret_key = args.secret_key or environ.get(SECRET_KEY_ENV) or None
    if bool(access_key) != bool(secret_key):
        raise ConfigError(
            f"give both an access key and a secret key (--access-key/--secret-key or ${ACCESS_KEY_ENV}/"
            f"${SECRET_KEY_ENV}), or neither"
        )
    options: dict[str, object] = {}
    if access_key and secret_key:
        options.update(access_key=access_key, secret_key=secret_key)
    if args.tls or args.tls_trust_cert:
        options.update(tls_enable=True, tls_auth_server=not args.tls_no_verify)
        if args.tls_trust_cert:
            options["tls_trust_cert_path"] = args.tls_trust_cert
    return options
