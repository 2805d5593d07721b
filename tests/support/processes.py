"""Start real OrbitMQ server processes on 127.0.0.1 for integration and fault tests.

Each process gets free ports (see :func:`free_port`), its own
directory under the test's tmp_path, and its output captured to a log file in that
directory, printed when a start times out. Callers must stop or kill every process
they start; the pytest fixtures in tests/integration/conftest.py do it in teardown.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 30.0


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port_block(count: int) -> int:
    """The first of ``count`` consecutive TCP ports on 127.0.0.1 that were all free a moment ago.

    Taken at random below the kernel's ephemeral range, not by binding port 0: a port the
    kernel hands out for port 0 can be handed out again, before the server binds it, to
    another port-0 bind (a server's own metrics exporter, in one CI run) or as the local
    port of any outgoing connection; below the range neither can land on it.
    """
    ephemeral_low = _ephemeral_low()
    low = max(1024, ephemeral_low - 20_000)
    for _ in range(100):
        base = random.randrange(low, ephemeral_low - count)
        sockets = []
        try:
            for port in range(base, base + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports below {ephemeral_low}")


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1 (see :func:`free_port_block`)."""
    return free_port_block(1)


def free_ports(count: int) -> list[int]:
    """``count`` ports of one server, each free a moment ago (see :func:`free_port_block`).

    No two are the same or neighbours: a broker also listens next to its port (the HA port one
    above, the VIP channel two below), and two random picks can meet (one CI run gave a
    standalone's broker and gRPC ports the same number).
    """
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if all(abs(port - other) > 2 for other in ports):
            ports.append(port)
    return ports


def wait_connectable(
    port: int, proc: subprocess.Popen[bytes], log_path: Path, timeout_s: float, *, own_listener: bool = False
) -> None:
    """Wait until ``port`` answers; with ``own_listener``, until ``proc`` itself listens on it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"process exited with {proc.returncode} before listening on {port}:\n{_tail(log_path)}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                pass
        except OSError:
            time.sleep(0.05)
            continue
        # Another test's server may hold the port this one failed to bind: it answers too.
        if not own_listener or _listens(proc.pid, port) is not False:
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listened on 127.0.0.1:{port} within {timeout_s} s:\n{_tail(log_path)}")


_LISTEN = "0A"


def _listens(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds a socket listening on TCP ``port`` (None: cannot tell here).

    Descriptors open and close while ``/proc/<pid>/fd`` is read (the listing's own among them
    when ``pid`` is this process): one that is gone by the time its link is read cannot be the
    listener looked for, so it is skipped rather than turning the answer into "cannot tell".
    Only a table or a descriptor directory that cannot be read at all answers None.
    """
    inodes = set()
    try:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == _LISTEN and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    except (OSError, IndexError, ValueError):
        return None
    try:
        entries = list(Path(f"/proc/{pid}/fd").iterdir())
    except FileNotFoundError:
        return False  # gone, or going: not started; the caller's next look sees the exit
    except OSError:
        return None
    if not inodes:
        return False
    for entry in entries:
        try:
            if os.readlink(entry) in inodes:
                return True
        except FileNotFoundError:
            continue  # closed since the listing
        except OSError:
            return None
    return False


def _tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class ServerProcess:
    """A running server subprocess."""

    name: str
    args: list[str]
    port: int
    workdir: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    extra_ports: list[int] = field(default_factory=list)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ServerProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it until it exits
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen(
            self.args, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        log.close()
        try:
            for port in [self.port, *self.extra_ports]:
                wait_connectable(port, self.proc, self.log_path, timeout_s, own_listener=True)
        except BaseException:
            self.kill()
            raise
        return self

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM and wait (graceful shutdown); SIGKILL if it does not exit in time."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """SIGKILL, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def log(self) -> str:
        return _tail(self.log_path, 200)


PORT_TAKEN = "address already in use"  # lower-cased: uvloop and socket word it differently


def start_on_free_ports(build: Callable[[], ServerProcess], attempts: int = 3) -> ServerProcess:
    """Start the server ``build()`` makes, again on ports it picks afresh if one was taken.

    A port free when picked can still be bound by another test's server before this one binds
    it (the tests run in parallel); the server then exits saying so, and only then is the
    start repeated. Any other failure is raised at once.
    """
    for attempt in range(attempts):
        server = build()
        logged = server.log_path.stat().st_size if server.log_path.exists() else 0
        try:
            return server.start()
        except RuntimeError:
            if attempt + 1 == attempts or PORT_TAKEN not in _log_since(server.log_path, logged).lower():
                raise
    raise AssertionError("unreachable")


def _log_since(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")
    except OSError:
        return ""


def start_namesrv(tmp_path: Path, name: str = "namesrv", *extra: str) -> ServerProcess:
    def build() -> ServerProcess:
        port = free_port()
        args = [sys.executable, "-m", "orbitmq.namesrv", "--listen-port", str(port), *extra]
        return ServerProcess(name, args, port, tmp_path / name, tmp_path / f"{name}.log")

    return start_on_free_ports(build)


def write_conf(path: Path, values: dict[str, object]) -> Path:
    lines = [
        f"{key}={str(value).lower() if isinstance(value, bool) else value}" for key, value in values.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def broker_conf(
    tmp_path: Path, name: str, namesrv_addr: str | None, port: int, **conf: object
) -> dict[str, object]:
    values: dict[str, object] = {
        "brokerClusterName": "DefaultCluster",
        "brokerName": name,
        "brokerId": 0,
        "listenPort": port,
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": str(tmp_path / name / "store"),
        "mapedFileSizeCommitLog": 16 * 1024 * 1024,
        "flushDiskType": "ASYNC_FLUSH",
    }
    if namesrv_addr:
        values["namesrvAddr"] = namesrv_addr
    values.update(conf)
    return values


def start_broker(
    tmp_path: Path, namesrv_addr: str | None, name: str = "broker-a", **conf: object
) -> ServerProcess:
    """A broker process; ``conf`` holds extra broker.conf keys (RocketMQ names)."""
    fixed_port = int(conf.pop("listenPort", 0))  # type: ignore[call-overload]
    workdir = tmp_path / name

    def build() -> ServerProcess:
        port = fixed_port or free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        values = broker_conf(tmp_path, name, namesrv_addr, port, **conf)
        conf_path = write_conf(workdir / "broker.conf", values)
        args = [sys.executable, "-m", "orbitmq.broker", "-c", str(conf_path)]
        return ServerProcess(name, args, port, workdir, tmp_path / f"{name}.log")

    return start_on_free_ports(build, attempts=1 if fixed_port else 3)


def start_standalone(tmp_path: Path, *extra: str, name: str = "standalone") -> ServerProcess:
    """`orbitmq standalone` on free ports with its data under tmp_path.

    ``extra_ports`` holds the broker port, then the gRPC port (unless ``--no-proxy``).
    """

    def build() -> ServerProcess:
        namesrv_port, broker_port, grpc_port = free_ports(3)
        ports = [broker_port]
        options = extra
        if "--no-proxy" not in extra:
            ports.append(grpc_port)
            options = ("--grpc-port", str(grpc_port), *extra)
        workdir = tmp_path / name
        args = [
            sys.executable,
            "-m",
            "orbitmq.cli",
            "standalone",
            "--data-dir",
            str(workdir / "data"),
            "--namesrv-port",
            str(namesrv_port),
            "--broker-port",
            str(broker_port),
            # /metrics on free ports: parallel tests must not contend for 5557/5558.
            *(() if "--no-metrics" in extra else ("--metrics-port", "0", "--namesrv-metrics-port", "0")),
            *options,
        ]
        return ServerProcess(name, args, namesrv_port, workdir, tmp_path / f"{name}.log", extra_ports=ports)

    return start_on_free_ports(build)


def create_topic(
    broker_addr: str, topic: str, queues: int = 4, perm: int = 6, attributes: str | None = None
) -> None:
    """Create ``topic`` on one broker with UPDATE_AND_CREATE_TOPIC, as `mqadmin updateTopic` does;
    ``attributes`` as ``updateTopic -a`` gives them (``+message.type=FIFO``)."""
    import asyncio

    from orbitmq.protocol.codes import RequestCode, ResponseCode
    from orbitmq.protocol.command import RemotingCommand
    from orbitmq.protocol.headers import CreateTopicRequestHeader
    from orbitmq.transport.connection import RemotingClient

    async def create() -> None:
        client = RemotingClient()
        try:
            header = CreateTopicRequestHeader(
                topic=topic, read_queue_nums=queues, write_queue_nums=queues, perm=perm, attributes=attributes
            )
            request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
            response = await client.invoke(broker_addr, request, timeout_ms=10_000)
        finally:
            await client.close()
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"creating {topic} on {broker_addr}: {response.code} {response.remark}")

    asyncio.run(create())


def wait_route(namesrv_addr: str, topic: str, broker_names: set[str], timeout_s: float = 15.0) -> None:
    """Wait until the nameserver's route of ``topic`` lists every broker in ``broker_names``.

    A broker's port accepts connections a moment before its first registration reaches the
    nameserver; a client asking for a route in that moment would find none.
    """
    import asyncio

    from orbitmq.protocol.bodies import decode_topic_route
    from orbitmq.protocol.codes import RequestCode, ResponseCode
    from orbitmq.protocol.command import RemotingCommand
    from orbitmq.transport.connection import RemotingClient

    async def poll() -> set[str]:
        client = RemotingClient()
        seen: set[str] = set()
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                response = await client.invoke(namesrv_addr, request)
                if response.code == ResponseCode.SUCCESS:
                    seen = {queue.broker_name for queue in decode_topic_route(response.body).queue_datas}
                    if broker_names <= seen:
                        return seen
                await asyncio.sleep(0.05)
        finally:
            await client.close()
        return seen

    seen = asyncio.run(poll())
    if not broker_names <= seen:
        raise RuntimeError(f"route of {topic} lists {sorted(seen)}, not all of {sorted(broker_names)}")
