"""Apache's Go client (rocketmq-client-go/v2) for tests/interop: its driver built once, cached.

``tests/interop/go`` pins the module in ``go.mod``/``go.sum``. :func:`go_driver` builds its
``main.go`` with the module cache, the build cache and GOPATH under the git-ignored
``.cache/go`` (a fresh machine fetches the modules from the Go module proxy on the first run),
once per content hash of those three files, under a file lock shared by pytest-xdist workers.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from tests.support.cached_build import build_once
from tests.support.interop_java import Event, parse_events

REPO_ROOT = Path(__file__).resolve().parents[2]
GO_DIR = REPO_ROOT / "tests" / "interop" / "go"
GO_CACHE = REPO_ROOT / ".cache" / "go"
SOURCES = ("go.mod", "go.sum", "main.go")


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GOPATH=str(GO_CACHE),
        GOMODCACHE=str(GO_CACHE / "mod"),
        GOCACHE=str(GO_CACHE / "build"),
        GOFLAGS="-mod=readonly",
        GOTOOLCHAIN="local",
    )
    return env


def go_available() -> str | None:
    return None if shutil.which("go") else "go"


def go_driver() -> Path:
    """The built driver binary (built first when missing)."""
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((GO_DIR / name).read_bytes())
    directory = REPO_ROOT / ".cache" / "interop" / "go" / f"godriver-{digest.hexdigest()[:16]}"
    binary = directory / "godriver"
    env = go_env()

    def steps() -> list[list[str]]:
        # build_once runs steps with the caller's environment: the Go variables go in front.
        prefix = [
            "env",
            *(f"{key}={env[key]}" for key in ("GOPATH", "GOMODCACHE", "GOCACHE", "GOFLAGS", "GOTOOLCHAIN")),
        ]
        return [
            [*prefix, "go", "-C", str(GO_DIR), "mod", "download"],
            [*prefix, "go", "-C", str(GO_DIR), "build", "-o", str(binary), "."],
        ]

    build_once(directory, "the rocketmq-client-go driver", steps)
    return binary


def run_go(args: list[str], home: Path, timeout_s: float = 120.0) -> list[Event]:
    """Run the driver with ``args``; its events, or RuntimeError with its output."""
    home.mkdir(parents=True, exist_ok=True)
    env = go_env()
    env["HOME"] = str(home)  # the client writes its local offsets and logs under the home
    done = subprocess.run(
        [str(go_driver()), *args], capture_output=True, timeout=timeout_s, env=env, cwd=home
    )
    text = done.stdout.decode(errors="replace")
    events = parse_events(text)
    errors = [event for event in events if event.get("event") == "error"]
    if done.returncode != 0 or errors:
        raise RuntimeError(
            f"godriver {' '.join(args)[:300]} exited {done.returncode}: {errors}\n{text[-3000:]}\n"
            f"{done.stderr.decode(errors='replace')[-3000:]}"
        )
    return events
