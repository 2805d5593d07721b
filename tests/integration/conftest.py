"""Fixtures that start real OrbitMQ processes and real RocketMQ C++ clients.

Every process started here is killed in the fixture's teardown, whatever the test did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess, start_broker, start_namesrv, start_standalone, wait_route

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_standalone(tmp_path)
    try:
        yield proc
    finally:
        proc.kill()


@dataclass
class Cluster:
    namesrv: ServerProcess
    brokers: list[ServerProcess]

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """One nameserver and two master brokers (broker-a, broker-b) in separate processes."""
    started: list[ServerProcess] = []
    try:
        namesrv = start_namesrv(tmp_path)
        started.append(namesrv)
        for name in ("broker-a", "broker-b"):
            started.append(start_broker(tmp_path, namesrv.addr, name=name))
        wait_route(namesrv.addr, "TBW102", {"broker-a", "broker-b"})
        yield Cluster(namesrv, started[1:])
    finally:
        for proc in reversed(started):
            proc.kill()


class CppClient:
    """Runs tests/support/cpp_client.py children with HOME in a temporary directory."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.home.mkdir(parents=True, exist_ok=True)
        self.children: list[subprocess.Popen[bytes]] = []
        self.client_retries = 0
        self._count = 0

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["HOME"] = str(self.home)
        env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def produce(
        self, namesrv: str, topic: str, *args: str, timeout_s: float = 60.0
    ) -> list[dict[str, object]]:
        cmd = [
            sys.executable,
            "-m",
            "tests.support.cpp_client",
            "produce",
            "--namesrv",
            namesrv,
            "--topic",
            topic,
            *args,
        ]
        done = subprocess.run(cmd, env=self.env(), cwd=REPO_ROOT, capture_output=True, timeout=timeout_s)
        events = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
        if done.returncode != 0:
            raise AssertionError(f"producer exited {done.returncode}: {done.stderr.decode()[-3000:]}")
        # "client_retry" events record the C++ client's own lock race (see cpp_client.py).
        self.client_retries += sum(event["event"] == "client_retry" for event in events)
        return [event for event in events if event["event"] == "sent"]

    def start_consumer(self, namesrv: str, topic: str, group: str, *args: str) -> CppConsumer:
        self._count += 1
        out = self.home / f"consumer-{self._count}.jsonl"
        err = self.home / f"consumer-{self._count}.err"
        cmd = [
            sys.executable,
            "-m",
            "tests.support.cpp_client",
            "consume",
            "--namesrv",
            namesrv,
            "--topic",
            topic,
            "--group",
            group,
            *args,
        ]
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            proc = subprocess.Popen(cmd, env=self.env(), cwd=REPO_ROOT, stdout=stdout, stderr=stderr)
        self.children.append(proc)
        consumer = CppConsumer(proc, out, err)
        consumer.wait_for(lambda events: any(e["event"] == "started" for e in events), 30)
        return consumer

    def kill_all(self) -> None:
        for proc in self.children:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


@dataclass
class CppConsumer:
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def events(self) -> list[dict[str, object]]:
        lines = self.out.read_text(errors="replace").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{") and line.endswith("}")]

    def received(self) -> list[dict[str, object]]:
        return [event for event in self.events() if event["event"] == "received"]

    def wait_for(self, predicate: object, timeout_s: float) -> list[dict[str, object]]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            events = self.events()
            if predicate(events):  # type: ignore[operator]
                return events
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"consumer exited {self.proc.returncode}: {self.err.read_text()[-3000:]}"
                )
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout_s} s; got {len(self.received())} messages")

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM: the child shuts the consumer down cleanly (commits offsets, unregisters)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def cpp(tmp_path: Path) -> Iterator[CppClient]:
    client = CppClient(tmp_path / "cpp-home")
    try:
        yield client
    finally:
        client.kill_all()
