"""The Redis Streams peer of ``bench compare``: a temporary ``redis-server`` and the same
workload through redis-py, as its documentation recommends.

The server is Debian's ``redis-server`` (found on PATH, else /usr/bin or /usr/sbin), started on
a free port of 127.0.0.1 with its data in a temporary directory, the AOF on (``appendonly yes``,
``appendfsync everysec``; ``always`` for the sync-latency series) and RDB snapshots off, so the
AOF is its only persistence, like OrbitMQ's CommitLog. Produce is pipelined XADD batches (one
reply per message, each meaning "in the AOF buffer", as OrbitMQ's ASYNC_FLUSH means "in the
page cache"); consume is XREAD, and XREADGROUP with one XACK per batch, in large COUNT batches.

redis-py is blocking, so these functions run on the calling thread, outside any event loop.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from orbitmq.bench._peers import Phase, process_cpu_s

__all__ = [
    "INSTALL_HINT",
    "RedisServer",
    "find_redis_server",
    "hiredis_active",
    "redis_consume_group",
    "redis_consume_xread",
    "redis_produce",
    "redis_sync_latency",
]

INSTALL_HINT = (
    "install Debian's package: apt-get install -y --no-install-recommends redis-server "
    "(and redis-py: pip install -e '.[compare]')"
)
_FIELD = b"d"
START_TIMEOUT_S = 20.0


def find_redis_server(explicit: str | None = None) -> str | None:
    """The ``redis-server`` binary to run: ``explicit`` when given and present, else PATH, else
    /usr/bin and /usr/sbin; None when there is none."""
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("redis-server") or shutil.which("redis-server", path="/usr/bin:/usr/sbin")


def hiredis_active() -> bool:
    """Whether redis-py parses replies with hiredis (its C parser, installed by the compare extra)."""
    try:
        from redis.utils import HIREDIS_AVAILABLE
    except ImportError:
        return False
    return bool(HIREDIS_AVAILABLE)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One ``redis-server`` subprocess with its data under ``workdir``; :meth:`stop` kills it."""

    def __init__(self, binary: str, workdir: Path) -> None:
        import redis

        workdir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        cmd = [
            binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(workdir),
            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
            "--daemonize", "no", "--protected-mode", "yes", "--logfile", str(workdir / "redis.log"),
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1) as probe:
                    probe.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"redis-server did not start within {START_TIMEOUT_S:g} s") from None
                time.sleep(0.05)
        self.version = str(self.client().info("server")["redis_version"])

    def client(self) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port)

    def cpu_s(self) -> float:
        return process_cpu_s(self.proc.pid)

    def set_fsync(self, mode: str) -> None:
        """``appendfsync`` to ``everysec`` or ``always`` (CONFIG SET, no restart)."""
        with self.client() as client:
            client.config_set("appendfsync", mode)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def redis_produce(server: RedisServer, key: str, count: int, body: bytes, batch: int) -> Phase:
    """``count`` XADDs of ``body`` to stream ``key``, pipelined ``batch`` per round trip."""
    with server.client() as client:
        client.ping()
        phase = Phase.begin(server.cpu_s())
        sent = 0
        while sent < count:
            size = min(batch, count - sent)
            pipe = client.pipeline(transaction=False)
            for _ in range(size):
                pipe.xadd(key, {_FIELD: body})
            replies = pipe.execute()
            if len(replies) != size:
                raise RuntimeError(f"XADD pipeline answered {len(replies)} of {size}")
            sent += size
            phase.add(size, size * len(body))
        return phase.end(server.cpu_s())


def redis_consume_xread(server: RedisServer, key: str, count: int, batch: int) -> Phase:
    """Read stream ``key`` from its start with XREAD COUNT ``batch`` until ``count`` entries;
    timed from connecting (start-up) to the last entry."""
    phase = Phase.begin(server.cpu_s())
    with server.client() as client:
        last_id: bytes | str = "0-0"
        deadline = time.monotonic() + 120
        while phase.count < count and time.monotonic() < deadline:
            answer = client.xread({key: last_id}, count=batch, block=1000)
            for _, entries in answer:
                if entries:
                    last_id = entries[-1][0]
                    phase.add(len(entries), sum(len(fields[_FIELD]) for _, fields in entries))
        return phase.end(server.cpu_s())


def redis_consume_group(server: RedisServer, key: str, group: str, count: int, batch: int) -> Phase:
    """A consumer group created at the stream's start; XREADGROUP ``>`` COUNT ``batch``, each
    batch acknowledged with one XACK. Timed from connecting and creating the group."""
    phase = Phase.begin(server.cpu_s())
    with server.client() as client:
        client.xgroup_create(key, group, id="0")
        deadline = time.monotonic() + 120
        while phase.count < count and time.monotonic() < deadline:
            answer = client.xreadgroup(group, "bench-consumer", {key: ">"}, count=batch, block=1000)
            for _, entries in answer:
                if entries:
                    client.xack(key, group, *(entry_id for entry_id, _ in entries))
                    phase.add(len(entries), sum(len(fields[_FIELD]) for _, fields in entries))
        return phase.end(server.cpu_s())


def redis_sync_latency(server: RedisServer, key: str, count: int, body: bytes) -> list[float]:
    """Round trips (ms) of ``count`` sequential XADDs, each awaited before the next."""
    samples = []
    with server.client() as client:
        client.ping()
        for _ in range(count):
            started = time.perf_counter()
            client.xadd(key, {_FIELD: body})
            samples.append((time.perf_counter() - started) * 1000)
        client.delete(key)
    return samples
