"""The official RocketMQ 5.x Python SDK in a virtual environment of its own, and a runner for it.

The SDK (PyPI ``rocketmq-python-client``, pinned below to the latest 5.x release) imports as
``rocketmq``, like the C++ 4.x client installed in the main environment, so it gets its own
venv, built once per SDK version under the git-ignored ``.cache/`` directory (a fresh CI
clone builds it during the test run; a dev machine reuses it). Its driver,
``tests/support/sdk5_client.py``, runs as a child process there; events come back as JSON
lines, as with the C++ driver.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support.cached_build import build_once

REPO_ROOT = Path(__file__).resolve().parents[2]
SDK_PACKAGE = "rocketmq-python-client"
SDK_VERSION = "5.1.2"
VENV_DIR = REPO_ROOT / ".cache" / f"{SDK_PACKAGE}-{SDK_VERSION}"
DRIVER = Path(__file__).resolve().parent / "sdk5_client.py"

Event = dict[str, object]


def sdk_python() -> Path:
    """The SDK venv's interpreter, building the venv first when it is missing or incomplete.

    Raises:
        RuntimeError: the venv could not be built (the message has pip's output).
    """
    python = VENV_DIR / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    build_once(
        VENV_DIR,
        f"the {SDK_PACKAGE} {SDK_VERSION} venv",
        lambda: [[sys.executable, "-m", "venv", str(VENV_DIR)], [*pip, f"{SDK_PACKAGE}=={SDK_VERSION}"]],
    )
    return python


def parse_events(text: str) -> list[Event]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{") and line.endswith("}")]


class Sdk5:
    """Runs driver children against one gRPC endpoint, HOME in a temporary directory.

    With ``tls_ca`` the SDK connects over TLS and trusts that CA certificate.
    """

    def __init__(
        self,
        python: Path,
        endpoint: str,
        home: Path,
        credentials: tuple[str, str] | None = None,
        tls_ca: Path | None = None,
    ) -> None:
        self.python = python
        self.endpoint = endpoint
        self.home = home
        self.credentials = credentials
        self.tls_ca = tls_ca
        self.home.mkdir(parents=True, exist_ok=True)
        self.children: list[subprocess.Popen[bytes]] = []
        self._count = 0

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["HOME"] = str(self.home)
        env.pop("PYTHONPATH", None)
        if self.credentials is not None:
            env["SDK5_ACCESS_KEY"], env["SDK5_SECRET_KEY"] = self.credentials
        if self.tls_ca is not None:
            # The SDK's TLS channel trusts grpc's default roots: the test's CA here.
            env["SDK5_TLS"] = "1"
            env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(self.tls_ca)
        return env

    def command(self, command: str, *args: str) -> list[str]:
        return [str(self.python), str(DRIVER), command, "--endpoint", self.endpoint, *args]

    def run(self, command: str, *args: str, timeout_s: float = 60.0) -> list[Event]:
        """Run one driver command to its end; fail with its stderr when it exits non-zero."""
        done = self.run_any(command, *args, timeout_s=timeout_s)
        events = parse_events(done.stdout.decode())
        if done.returncode != 0:
            raise AssertionError(
                f"sdk5 {command} exited {done.returncode}; events {events}\n{done.stderr.decode()[-3000:]}"
            )
        return events

    def run_any(
        self, command: str, *args: str, timeout_s: float = 60.0
    ) -> subprocess.CompletedProcess[bytes]:
        """Run one driver command to its end, whatever its exit status."""
        return subprocess.run(
            self.command(command, *args), env=self.env(), capture_output=True, timeout=timeout_s
        )

    def start(self, command: str, *args: str) -> Sdk5Process:
        """Start a driver command in the background (a consumer); its events go to a file."""
        self._count += 1
        out = self.home / f"{command}-{self._count}.jsonl"
        err = self.home / f"{command}-{self._count}.err"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            proc = subprocess.Popen(
                self.command(command, *args), env=self.env(), stdout=stdout, stderr=stderr
            )
        self.children.append(proc)
        return Sdk5Process(proc, out, err)

    def kill_all(self) -> None:
        for proc in self.children:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


@dataclass
class Sdk5Process:
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def events(self) -> list[Event]:
        return parse_events(self.out.read_text(errors="replace"))

    def received(self) -> list[Event]:
        return [event for event in self.events() if event["event"] == "received"]

    def wait_for(self, predicate: Callable[[list[Event]], bool], timeout_s: float) -> list[Event]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            events = self.events()
            if predicate(events):
                return events
            if self.proc.poll() is not None:
                events = self.events()
                if predicate(events):
                    return events
                raise AssertionError(
                    f"sdk5 child exited {self.proc.returncode}; events {events}\n{self.err.read_text()[-3000:]}"
                )
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout_s} s; events so far: {self.events()}")

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM: the child shuts its client down cleanly."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL, as in a crash: no NotifyClientTermination, no acks in flight."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
