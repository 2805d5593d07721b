"""``orbitmq``: one command for every OrbitMQ program.

``namesrv``, ``proxy``, ``admin``, ``cluster``, ``dashboard`` and ``bench`` hand their arguments to the
program's own entry point; ``broker`` does too, unless ``--enable-proxy`` asks for the gRPC
proxy beside it (local mode, as RocketMQ's ``mqbroker --enable-proxy``); ``standalone`` is the
main job: a nameserver, a broker and the gRPC proxy in one process, on the default ports, with an embedded data
directory, the broker registered with that nameserver. This module is where the servers are
put together in one process, so it sits above all of them in the import layers.

``standalone`` listens on 127.0.0.1 unless ``--bind-address`` (or ``bindAddress`` in the
``-c`` file) says otherwise: without ACL no server authenticates anyone, so every interface is
opt-in.

The broker.conf of a standalone also governs its name server and its proxy: ``aclEnable``
turns ACL on for all three (accounts in ``aclFile``, default ``<data dir>/conf/plain_acl.yml``;
the broker signs its registrations, and the gRPC proxy its calls to the broker, with a key made
at start and known only to this process), and the ``tls.*`` keys apply to both remoting ports.

The environment variables ``ORBITMQ_ACCESS_KEY`` / ``ORBITMQ_SECRET_KEY`` are read here, and
only here, for ``bench`` (``admin`` reads them itself), so a secret need not appear on a
command line.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from orbitmq.acl.accounts import Account
from orbitmq.acl.signature import Credentials
from orbitmq.conf import LOG_LEVELS
from orbitmq.errors import ConfigError, StoreLockedError

if TYPE_CHECKING:
    from orbitmq.broker.config import BrokerConfig
    from orbitmq.namesrv.config import NamesrvConfig

DEFAULT_DATA_DIR = ".orbitmq-data"
DEFAULT_NAMESRV_PORT = 9876
DEFAULT_BROKER_PORT = 10911
DEFAULT_GRPC_PORT = 8081
DEFAULT_METRICS_PORT = 5557
DEFAULT_NAMESRV_METRICS_PORT = 5558
DEFAULT_BIND_ADDRESS = "127.0.0.1"
_WILDCARD_ADDRESSES = ("0.0.0.0", "", "::")

_FORWARDED = {
    "namesrv": "run a nameserver (orbitmq namesrv --help)",
    "broker": "run a broker (orbitmq broker --help); --enable-proxy adds the gRPC proxy",
    "controller": "run a controller of controller mode (orbitmq controller --help)",
    "proxy": "run the gRPC proxy for RocketMQ 5.x clients (orbitmq proxy --help)",
    "admin": "administer topics, groups and clusters (orbitmq admin --help)",
    "cluster": "a local cluster: a nameserver and masters with slaves, or --brokers N, one per core",
    "bench": "benchmarks (orbitmq bench --help)",
    "dashboard": "a web dashboard over a cluster (orbitmq dashboard --namesrv HOST:PORT [--port 8080])",
    "store": "offline work on a closed store: import-rocketmq / export-rocketmq SRC DST (orbitmq store --help)",
}


def _version() -> str:
    try:
        return version("orbitmq")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _standalone_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "standalone",
        help="a nameserver and a broker in one process",
        description="Run a nameserver and a broker in one process, the broker registered with it.",
        epilog=STANDALONE_PORTS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-c", "--config-file", help="a RocketMQ broker.conf; flags given on the command line override it"
    )
    parser.add_argument(
        "--data-dir", default=DEFAULT_DATA_DIR, help=f"data directory (default ./{DEFAULT_DATA_DIR})"
    )
    parser.add_argument("--namesrv-port", type=int, help=f"nameserver port ({DEFAULT_NAMESRV_PORT})")
    parser.add_argument(
        "--broker-port", type=int, help=f"broker port (the file's listenPort, else {DEFAULT_BROKER_PORT})"
    )
    parser.add_argument(
        "--bind-address",
        help=f"interface every server listens on (default {DEFAULT_BIND_ADDRESS}: this host only; "
        "0.0.0.0: every interface, without authentication; see the README)",
    )
    parser.add_argument(
        "--broker-ip",
        help="address clients are told to reach the broker at (default: the bind address; "
        "bound to 0.0.0.0, this host's first non-loopback IPv4 address)",
    )
    parser.add_argument(
        "--grpc-port",
        type=int,
        help=f"gRPC port for RocketMQ 5.x clients (the file's grpcServerPort, else {DEFAULT_GRPC_PORT} "
        "moved as far as --broker-port moves the broker)",
    )
    parser.add_argument("--no-proxy", action="store_true", help="do not serve gRPC (RocketMQ 5.x clients)")
    parser.add_argument("--flush", choices=("sync", "async"), help="flushDiskType SYNC_FLUSH or ASYNC_FLUSH")
    parser.add_argument(
        "--metrics-port",
        type=int,
        help=f"broker Prometheus /metrics port (the file's metricsPromExporterPort, else {DEFAULT_METRICS_PORT} "
        "moved as far as --broker-port moves the broker; 0 = any free port)",
    )
    parser.add_argument(
        "--namesrv-metrics-port",
        type=int,
        help=f"nameserver Prometheus /metrics port ({DEFAULT_NAMESRV_METRICS_PORT} moved as far as "
        "--namesrv-port moves the nameserver; 0 = any free port)",
    )
    parser.add_argument("--no-metrics", action="store_true", help="serve no /metrics")
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help="logging level (INFO)"
    )


STANDALONE_PORTS_EPILOG = f"""\
ports: a port given by a flag wins over the -c file, which wins over the default. The
default gRPC and broker /metrics ports move with the broker port, the nameserver's /metrics
port with the nameserver port, by as much as it moved from its own default:
  gRPC                 = broker port - {DEFAULT_BROKER_PORT} + {DEFAULT_GRPC_PORT}
  broker /metrics      = broker port - {DEFAULT_BROKER_PORT} + {DEFAULT_METRICS_PORT}
  nameserver /metrics  = nameserver port - {DEFAULT_NAMESRV_PORT} + {DEFAULT_NAMESRV_METRICS_PORT}
so --namesrv-port 9976 --broker-port 11011 serve gRPC on 8181, the broker's /metrics on 5657
and the nameserver's on 5758: a second standalone beside one on the defaults needs those two flags."""


@dataclass(frozen=True)
class _StandalonePorts:
    """Every port a standalone listens on, and the flag (if any) that moves each one."""

    namesrv: int
    broker: int
    grpc: int
    metrics: int
    namesrv_metrics: int
    flags: dict[int, str]


def _standalone_ports(args: argparse.Namespace, file_values: dict[str, str]) -> _StandalonePorts:
    """Flag > file > default (derived from the broker or nameserver port); see the epilog.

    Raises:
        ConfigError: a port is not a TCP port; the message names the flag that sets it.
    """
    namesrv = args.namesrv_port if args.namesrv_port is not None else DEFAULT_NAMESRV_PORT
    if not 0 < namesrv <= 65535:
        # Port 0 (any free port) would leave the broker and the proxy, configured before the
        # nameserver binds, registering with and reading routes from port 0.
        raise ConfigError(
            f"--namesrv-port {namesrv} is not a TCP port (1-65535); "
            "the broker is given the nameserver's address before it starts"
        )
    flags = {namesrv: "--namesrv-port"}

    def pick(flag: str, given: int | None, key: str | None, derived: int) -> int:
        if given is not None:
            port = given
        elif key is not None and file_values.get(key, "").strip():
            try:
                return int(file_values[key])  # the file's own key is checked where it is loaded
            except ValueError:
                raise ConfigError(f"config key '{key}': {file_values[key]!r} is not a port") from None
        else:
            port = derived
            if not 0 < port <= 65535:
                raise ConfigError(
                    f"the default {flag.removeprefix('--')} derived from the ports given would be {port}, "
                    f"not a TCP port: pass {flag}"
                )
        if not 0 <= port <= 65535:
            raise ConfigError(f"{flag} {port} is not a TCP port (0-65535)")
        flags.setdefault(port, flag)
        return port

    broker = pick("--broker-port", args.broker_port, "listenPort", DEFAULT_BROKER_PORT)
    broker_shift = broker - DEFAULT_BROKER_PORT
    grpc = metrics = namesrv_metrics = 0  # 0 where the server is off
    if not args.no_proxy:
        grpc = pick("--grpc-port", args.grpc_port, "grpcServerPort", DEFAULT_GRPC_PORT + broker_shift)
    if not args.no_metrics:
        metrics = pick(
            "--metrics-port",
            args.metrics_port,
            "metricsPromExporterPort",
            DEFAULT_METRICS_PORT + broker_shift,
        )
        namesrv_metrics = pick(
            "--namesrv-metrics-port",
            args.namesrv_metrics_port,
            None,
            DEFAULT_NAMESRV_METRICS_PORT + namesrv - DEFAULT_NAMESRV_PORT,
        )
    flags.pop(0, None)  # any free port: never in use
    return _StandalonePorts(namesrv, broker, grpc, metrics, namesrv_metrics, flags)


def run_standalone(args: argparse.Namespace) -> int:
    # Imported here so that `orbitmq bench ...` does not pay for the servers' imports.
    from orbitmq.broker.app import BrokerApp
    from orbitmq.broker.config import load_broker_configs
    from orbitmq.conf import load_properties
    from orbitmq.namesrv.app import NamesrvApp
    from orbitmq.namesrv.config import load_namesrv_config
    from orbitmq.proxy import ProxyApp, ProxyConfig
    from orbitmq.store.dir_lock import lock_store_dir
    from orbitmq.transport.runner import App, run_apps

    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    data_dir = Path(args.data_dir).resolve()
    try:
        file_values = load_properties(args.config_file) if args.config_file else {}
        ports = _standalone_ports(args, file_values)
    except ConfigError as exc:
        print(f"orbitmq standalone: {exc}", file=sys.stderr)
        return 2
    bind = args.bind_address or str(file_values.get("bindAddress") or DEFAULT_BIND_ADDRESS)
    # The broker reaches the nameserver in-process through whichever interface is bound.
    local_host = "127.0.0.1" if bind in _WILDCARD_ADDRESSES else bind
    overrides: dict[str, object] = {
        "namesrvAddr": f"{local_host}:{ports.namesrv}",
        "listenPort": ports.broker,
        "bindAddress": bind,
        "storePathRootDir": str(data_dir / "store"),
    }
    if args.broker_ip:
        overrides["brokerIP1"] = args.broker_ip
    if args.flush:
        overrides["flushDiskType"] = "SYNC_FLUSH" if args.flush == "sync" else "ASYNC_FLUSH"
    if not args.no_proxy:
        overrides["grpcServerPort"] = ports.grpc
        if args.bind_address or "grpcBindAddress" not in file_values:
            overrides["grpcBindAddress"] = bind
    namesrv_overrides: dict[str, object] = {
        "listenPort": ports.namesrv,
        "bindAddress": bind,
        "kvConfigPath": str(data_dir / "namesrv" / "kvConfig.json"),
    }
    if not args.no_metrics:
        # /metrics on the interface the standalone binds, like its other ports.
        overrides.update(
            metricsExporterType="PROM",
            metricsPromExporterPort=ports.metrics,
            metricsPromExporterHost=bind,
        )
        namesrv_overrides.update(
            metricsExporterType="PROM",
            metricsPromExporterPort=ports.namesrv_metrics,
            metricsPromExporterHost=bind,
        )
    try:
        namesrv_config = load_namesrv_config(None, namesrv_overrides)
        broker_config, store_config, proxy_config = load_broker_configs(
            args.config_file, overrides, (ProxyConfig,)
        )
        broker_config, namesrv_config = _standalone_security(broker_config, namesrv_config, data_dir)
    except ConfigError as exc:
        print(f"orbitmq standalone: {exc}", file=sys.stderr)
        return 2
    try:
        # Held until the process ends: a second standalone on this directory (the name
        # server's kvConfig and the store) stops here, before it binds or writes anything.
        data_lock = lock_store_dir(data_dir, "data")
    except StoreLockedError as exc:
        print(f"orbitmq standalone: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        print(
            f"orbitmq standalone: cannot create the data directory {data_dir}: {reason} "
            "(pass --data-dir with a directory this user can write)",
            file=sys.stderr,
        )
        return 2
    log = logging.getLogger("orbitmq")
    log.info(
        "standalone: nameserver on %s:%d, broker on %s:%d (advertised as %s), gRPC %s, data in %s",
        namesrv_config.bind_address,
        ports.namesrv,
        broker_config.bind_address,
        ports.broker,
        broker_config.advertised_address,
        "off" if args.no_proxy else f"on {proxy_config.grpc_bind_address}:{proxy_config.grpc_server_port}",
        data_dir,
    )
    if not broker_config.acl_enable and not bind.startswith("127.") and bind != "::1":
        log.warning(
            "standalone: listening beyond this host (%s) without authentication: whoever reaches "
            "the ports can send, read and delete messages, and create and delete topics",
            bind,
        )
    inner = _standalone_inner_account() if broker_config.acl_enable else None
    inner_accounts = [inner] if inner else []
    credentials = Credentials(inner.access_key, inner.secret_key) if inner else None
    apps: list[App] = [
        NamesrvApp(namesrv_config, inner_accounts=inner_accounts),
        BrokerApp(
            broker_config, store_config, namesrv_credentials=credentials, inner_accounts=inner_accounts
        ),
    ]
    if not args.no_proxy:
        proxy_config = replace(proxy_config, acl_file=broker_config.acl_file)
        apps.append(ProxyApp(proxy_config, credentials=credentials, tls=broker_config.tls))
    try:
        return run_apps(apps, ports.flags)
    finally:
        data_lock.release()


def _standalone_security(
    broker_config: BrokerConfig, namesrv_config: NamesrvConfig, data_dir: Path
) -> tuple[BrokerConfig, NamesrvConfig]:
    """The broker's ACL and TLS settings, extended to the embedded name server."""
    from orbitmq.transport.tls import TlsMode

    if broker_config.acl_enable and not broker_config.acl_file:
        broker_config = replace(broker_config, acl_file=str(data_dir / "conf" / "plain_acl.yml"))
    tls = broker_config.tls
    if tls.server_mode is TlsMode.ENFORCING and not tls.client_enable:
        # The broker registers with its own process over loopback: encrypt, nothing to verify;
        # where client certificates are required, it presents the server's own certificate.
        own_cert = tls.server_need_client_auth != "none" and not tls.client_cert_path
        tls = replace(
            tls,
            client_enable=True,
            client_auth_server=False,
            client_cert_path=tls.server_cert_path if own_cert else tls.client_cert_path,
            client_key_path=tls.server_key_path if own_cert else tls.client_key_path,
            client_key_password=tls.server_key_password if own_cert else tls.client_key_password,
        )
        broker_config = replace(broker_config, tls=tls)
    namesrv_config = replace(
        namesrv_config, acl_enable=broker_config.acl_enable, acl_file=broker_config.acl_file, tls=tls
    )
    return broker_config, namesrv_config


def _standalone_inner_account() -> Account:
    """A random admin key for the process's own calls (registrations, its gRPC proxy), never written anywhere."""
    return Account(f"orbitmq-standalone-{secrets.token_hex(8)}", secrets.token_urlsafe(32), admin=True)


def run_broker_with_proxy(args: argparse.Namespace) -> int:
    """``orbitmq broker --enable-proxy [--grpc-port N] ...``: a broker and its local gRPC proxy."""
    from orbitmq.broker.__main__ import overrides_of, port_flags_of, store_dir_problem
    from orbitmq.broker.app import BrokerApp
    from orbitmq.broker.config import load_broker_configs
    from orbitmq.conf import load_properties
    from orbitmq.proxy import ProxyApp, ProxyConfig
    from orbitmq.transport.runner import run_apps

    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        overrides = overrides_of(args)
        if args.grpc_port is not None:
            overrides["grpcServerPort"] = args.grpc_port
        file_values = load_properties(args.config_file) if args.config_file else {}
        # The proxy beside the broker listens where the broker does, unless grpcBindAddress says
        # otherwise: the broker's --bind-address flag, else its file's bindAddress.
        bind = args.bind_address or file_values.get("bindAddress")
        if bind and (args.bind_address is not None or "grpcBindAddress" not in file_values):
            overrides["grpcBindAddress"] = bind
        broker_config, store_config, proxy_config = load_broker_configs(
            args.config_file, overrides, (ProxyConfig,)
        )
        if not proxy_config.namesrv_addr:
            raise ConfigError("--enable-proxy needs namesrvAddr: the proxy reads routes from name servers")
    except ConfigError as exc:
        print(f"orbitmq broker: {exc}", file=sys.stderr)
        return 2
    # With ACL the proxy calls its broker with a key made now that only this process knows.
    inner = _standalone_inner_account() if broker_config.acl_enable else None
    credentials = Credentials(inner.access_key, inner.secret_key) if inner else None
    acl_file = broker_config.acl_file or str(
        Path(store_config.store_path_root_dir) / "conf" / "plain_acl.yml"
    )
    if problem := store_dir_problem(store_config.store_path_root_dir):
        print(f"orbitmq broker: {problem}", file=sys.stderr)
        return 2
    broker = BrokerApp(broker_config, store_config, inner_accounts=[inner] if inner else [])
    proxy = ProxyApp(replace(proxy_config, acl_file=acl_file), credentials=credentials, tls=broker_config.tls)
    return run_apps([broker, proxy], port_flags_of(args))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``orbitmq`` command; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="orbitmq", description="OrbitMQ: RocketMQ's architecture in Python")
    parser.add_argument("--version", action="version", version=f"orbitmq {_version()}")
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

        return namesrv_main(rest, prog="orbitmq namesrv")
    if command == "broker":
        from orbitmq.broker.__main__ import parse_args, run

        args = parse_args(rest, "orbitmq broker", proxy_flags=True)
        return run_broker_with_proxy(args) if args.enable_proxy else run(args)
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
    if command == "store":
        from orbitmq.cli.store import main as store_main

        return store_main(rest)
    if command == "dashboard":
        try:
            from orbitmq.dashboard.__main__ import main as dashboard_main
        except ModuleNotFoundError as exc:
            # The dashboard's libraries are an extra; the package imports them first of all.
            print(
                f"orbitmq dashboard: the Python module {exc.name!r} is missing: the dashboard needs the "
                "'dashboard' extra: pip install 'orbitmq[dashboard]' (from a clone: pip install '.[dashboard]')",
                file=sys.stderr,
            )
            return 1
        return dashboard_main(rest)
    from orbitmq.bench.__main__ import main as bench_main
    from orbitmq.cli._security import ACCESS_KEY_ENV, SECRET_KEY_ENV

    access_key, secret_key = os.environ.get(ACCESS_KEY_ENV), os.environ.get(SECRET_KEY_ENV)
    credentials = (access_key, secret_key) if access_key and secret_key else None
    return bench_main(rest, prog="orbitmq bench", credentials=credentials)
