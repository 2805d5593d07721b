"""``bench consume --compare-defaults``'s Go line: Apache's Go client (rocketmq-client-go/v2) as
a push consumer at its defaults, in a process of its own.

The driver, ``go_consume/`` beside this module (``main.go`` with the ``go.mod``/``go.sum`` that
pin the client at the version the interop tier uses), is built with ``go build`` once per
content of those three files into ``.cache/bench-go/<digest>/`` (under a file lock: two
benchmarks may start at once), with GOPATH, the module cache and the build cache under
``.cache/go``: a fresh machine fetches the modules from the Go module proxy on the first run.
Without ``go`` on PATH, or when the build fails, the line is skipped with one sentence.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from orbitmq.bench._client_drivers import DriverResult, built_once
from orbitmq.bench.peers._maven import cache_dir

__all__ = ["go_push_consume"]

BUILD_TIMEOUT_S = 600
_DRIVER_DIR = Path(__file__).with_name("go_consume")
_SOURCES = ("go.mod", "go.sum", "main.go")
_BINARY = "goconsume"


class GoMissing(Exception):
    """The driver cannot be built here; the message says why in one sentence."""


def _go_env(home: Path | None = None) -> dict[str, str]:
    go_cache = cache_dir() / "go"
    env = {
        **os.environ,
        "GOPATH": str(go_cache),
        "GOMODCACHE": str(go_cache / "mod"),
        "GOCACHE": str(go_cache / "build"),
        "GOFLAGS": "-mod=readonly",
        "GOTOOLCHAIN": "local",
        # The client logs at info level (to stderr) by default; the driver lowers it too.
        "ROCKETMQ_GO_LOG_LEVEL": "error",
    }
    if home is not None:
        env["HOME"] = str(home)  # the client keeps its local offset store and logs under it
    return env


def _built() -> Path:
    """The driver binary (built on first use)."""
    digest = hashlib.sha256()
    for name in _SOURCES:
        digest.update((_DRIVER_DIR / name).read_bytes())

    def build_into(directory: Path) -> None:
        command = ["go", "-C", str(_DRIVER_DIR), "build", "-o", str(directory / _BINARY), "."]
        try:
            built = subprocess.run(command, capture_output=True, timeout=BUILD_TIMEOUT_S, env=_go_env())
        except subprocess.TimeoutExpired as exc:
            raise GoMissing(f"the Go driver did not build within {BUILD_TIMEOUT_S} s") from exc
        if built.returncode != 0:
            output = built.stderr.decode(errors="replace").strip().splitlines()
            # "go: downloading ..." lines come first; the error is the last line.
            raise GoMissing(f"the Go driver did not build: {(output or ['no output'])[-1][:200]}")

    return built_once(cache_dir() / "bench-go", digest.hexdigest()[:16], build_into) / _BINARY


def go_push_consume(namesrv: str, topic: str, group: str, count: int, timeout_s: float) -> DriverResult:
    """Run the Go push consumer until it read ``count`` messages of ``topic`` (or ``timeout_s``)."""
    if shutil.which("go") is None:
        return DriverResult(skipped="no go on PATH (the Go client is built from source with it)")
    try:
        binary = _built()
    except (GoMissing, OSError, subprocess.SubprocessError) as exc:
        return DriverResult(skipped=str(exc))
    limit_s = timeout_s + 60
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-go-") as home:
        command = [str(binary), namesrv, topic, group, str(count), str(timeout_s)]
        try:
            done = subprocess.run(
                command, capture_output=True, timeout=limit_s, env=_go_env(Path(home)), cwd=home
            )
        except subprocess.TimeoutExpired:
            return DriverResult(skipped=f"the Go consumer did not exit within {limit_s:g} s")
    lines = [line for line in done.stdout.decode(errors="replace").splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        output = [line.strip() for line in (done.stderr + done.stdout).decode(errors="replace").splitlines()]
        # The driver's own line says what failed; the client's error logs may come before it.
        why = next((line for line in output if line.startswith("goconsume:")), "") or next(
            (line for line in output if line), "no output"
        )
        return DriverResult(skipped=f"the Go consumer failed (exit {done.returncode}): {why[:200]}")
    return DriverResult.from_json_line(lines[-1])
