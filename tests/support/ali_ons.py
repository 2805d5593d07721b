"""ali-ons, the pure-JavaScript RocketMQ client, installed from npm once, and a runner for it.

``tests/support/ali_ons/package.json`` and its ``package-lock.json`` pin ali-ons 3.12.0 (and
urllib, its HTTP client); ``npm ci`` installs exactly that into the git-ignored ``.cache/``
directory the first time a test asks for it (a fresh CI clone during the test run, a dev
machine once). The driver, ``tests/support/ali_ons/driver.js``, runs under the machine's
Node.js with ``NODE_PATH`` pointing there; events come back as JSON lines, as with the C++
and 5.x SDK drivers. Without ``node`` and ``npm`` the tests that need it skip, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.support.cached_build import build_once

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = Path(__file__).resolve().parent / "ali_ons"
DRIVER = PACKAGE_DIR / "driver.js"
ALI_ONS_VERSION = "3.12.0"
INSTALL_DIR = REPO_ROOT / ".cache" / f"ali-ons-{ALI_ONS_VERSION}"

Event = dict[str, object]


def missing_tools() -> str | None:
    """Why ali-ons cannot run here (None when ``node`` and ``npm`` are on PATH)."""
    absent = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if absent:
        return f"{' and '.join(absent)} not found (Debian: apt-get install nodejs npm)"
    return None


def node_modules() -> Path:
    """The installed ``node_modules``, running ``npm ci`` first when it is missing or incomplete.

    Raises:
        RuntimeError: npm failed (the message has its output).
    """

    def steps() -> list[list[str]]:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(PACKAGE_DIR / name, INSTALL_DIR / name)
        return [["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"]]

    build_once(INSTALL_DIR, f"ali-ons {ALI_ONS_VERSION}", steps)
    return INSTALL_DIR / "node_modules"


def run_driver(*args: str, timeout_s: float = 90.0) -> list[Event]:
    """Run ``driver.js`` with ``args`` to its end; its JSON events, in order.

    Raises:
        AssertionError: the driver did not finish within ``timeout_s`` or exited non-zero
            (the message has its output).
    """
    env = {**os.environ, "NODE_PATH": str(node_modules())}
    try:
        done = subprocess.run(["node", str(DRIVER), *args], env=env, capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"ali-ons driver {args[:1]} ran over {timeout_s} s: {exc.stdout!r}") from None
    output = done.stdout.decode(errors="replace")
    if done.returncode != 0:
        raise AssertionError(
            f"ali-ons driver {args[:1]} exited {done.returncode}:\n{output}"
            f"{done.stderr.decode(errors='replace')[-2000:]}"
        )
    return [json.loads(line) for line in output.splitlines() if line.startswith('{"event"')]
