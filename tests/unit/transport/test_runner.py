"""The app runner: start in order, shut down in reverse, signals, forced exit."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from orbitmq.transport.runner import serve_apps


class RecordingApp:
    def __init__(
        self, name: str, log: list[str], *, fail_start: bool = False, fail_stop: bool = False
    ) -> None:
        self.name, self.log, self.fail_start, self.fail_stop = name, log, fail_start, fail_stop

    async def startup(self) -> None:
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start")
        self.log.append(f"start {self.name}")

    async def shutdown(self) -> None:
        self.log.append(f"stop {self.name}")
        if self.fail_stop:
            raise RuntimeError(f"{self.name} cannot stop")


async def test_runner_starts_in_order_and_stops_in_reverse() -> None:
    log: list[str] = []
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        serve_apps([RecordingApp("namesrv", log), RecordingApp("broker", log)], stop, handle_signals=False)
    )
    while len(log) < 2:
        await asyncio.sleep(0.001)
    stop.set()
    await task
    assert log == ["start namesrv", "start broker", "stop broker", "stop namesrv"]


async def test_runner_failed_startup_stops_started_apps_and_raises() -> None:
    log: list[str] = []
    apps = [RecordingApp("namesrv", log), RecordingApp("broker", log, fail_start=True)]
    with pytest.raises(RuntimeError, match="broker cannot start"):
        await serve_apps(apps, asyncio.Event(), handle_signals=False)
    assert log == ["start namesrv", "stop namesrv"]


async def test_runner_failed_shutdown_still_stops_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []
    stop = asyncio.Event()
    stop.set()
    apps = [RecordingApp("namesrv", log), RecordingApp("broker", log, fail_stop=True)]
    await serve_apps(apps, stop, handle_signals=False)
    assert log == ["start namesrv", "start broker", "stop broker", "stop namesrv"]
    assert "broker cannot stop" in caplog.text


_HANGING_SHUTDOWN = textwrap.dedent(
    """
    import asyncio, sys
    from orbitmq.transport.runner import run_app

    class App:
        async def startup(self):
            print("started", flush=True)
        async def shutdown(self):
            print("stopping", flush=True)
            await asyncio.Event().wait()

    sys.exit(run_app(App()))
    """
)


def test_runner_second_sigint_forces_exit() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HANGING_SHUTDOWN], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
        proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline().strip() == "stopping"
        time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
