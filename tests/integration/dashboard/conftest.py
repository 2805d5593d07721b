"""A standalone server, a dashboard over it and a headless Chromium, shared by a module's tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import browser
from tests.support.processes import ServerProcess, free_port, start_standalone, wait_route


@dataclass
class Dashboard:
    standalone: ServerProcess
    server: ServerProcess

    @property
    def namesrv_addr(self) -> str:
        return self.standalone.addr

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"


def start_dashboard(tmp_path: Path, namesrv_addr: str, *extra: str) -> ServerProcess:
    port = free_port()
    args = [sys.executable, "-m", "orbitmq.dashboard", "--namesrv", namesrv_addr, "--port", str(port), *extra]
    return ServerProcess("dashboard", args, port, tmp_path / "dashboard", tmp_path / "dashboard.log").start()


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    tmp_path = tmp_path_factory.mktemp("dashboard")
    standalone = start_standalone(tmp_path, "--no-proxy")
    try:
        wait_route(standalone.addr, "TBW102", {"broker-a"})
        server = start_dashboard(tmp_path, standalone.addr, "--sample-interval-s", "1")
        try:
            yield Dashboard(standalone, server)
        finally:
            server.stop()
    finally:
        standalone.kill()


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    reason = browser.missing()
    if reason is not None:
        pytest.skip(reason)
    driver = browser.start_chromium(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()
