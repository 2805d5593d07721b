"""The README runs as written: its set-up, its servers, every example and every command, in a
fresh clone and a fresh virtual environment, so it cannot drift from what works.

Method: this checkout is cloned into a temporary directory (``git clone``; changes to tracked
files not yet committed are carried over with ``git diff HEAD | git apply``, which leaves the
checkout alone), then every fenced block of the clone's README.md runs in order, as the marker
before it says:

- ``<!-- readme-test: background PORT ... -->``: each line is a server, started as in its own
  terminal (its own session) in the background; every PORT must accept connections before the
  next block. The first is ``make standalone``, which creates ``.venv`` on first use.
- ``<!-- readme-test: run -->``: the block runs with ``bash -e``; it must exit 0.
- ``<!-- readme-test: file NAME -->``: the block is saved as NAME in the clone.
- ``<!-- readme-test: stop -->`` (no block): Ctrl-C to the running servers, which must shut
  down cleanly; servers still running when a new background block starts or the README ends
  get the same.
- ``<!-- readme-test: skip (REASON) -->``: not run. A block without a marker fails the test.

Commands run in the clone with no virtual environment activated (no venv ``bin`` on PATH, no
VIRTUAL_ENV, PYSPARK_PYTHON, PYTHONPATH or NAMESRV_ADDR) and HOME in a temporary directory
(the C++ client logs there); pip keeps its own cache and configuration. The README uses the
default ports (9876, 10911, 8081). When one is already taken (another ``orbitmq standalone`` on
this machine) and the machine allows it (root), the clone's set-up (``make install``, which needs
the network) runs first, then every block runs in a private network namespace with a loopback of
its own (:mod:`tests.support.netns`), where the default ports are free. Without that permission
the test waits up to two minutes for the ports (a server that lost its port meanwhile is started
again), then fails naming the port. A server counts as started only once its own log says it
bound the port, never because another program holds it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import netns

# It starts a Spark session of its own: on the Spark tier's xdist worker, never beside that
# tier's JVM (see tests/conftest.py).
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.xdist_group("spark"),
]

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_START_TIMEOUT_S = 900.0  # the first server block installs .venv (a cold pip cache included)
STOP_TIMEOUT_S = 30.0
PORT_WAIT_S = 120.0
RUN_TIMEOUT_S = 300.0

_MARKER = re.compile(r"<!-- readme-test: (?P<what>[^>]*?) -->")
_OTHER_COMMENT = re.compile(r"<!--(?! readme-test:).*?-->", re.DOTALL)
_FENCE = re.compile(r"^```[^\n]*\n(?P<body>.*?)^```$", re.DOTALL | re.MULTILINE)


@dataclass
class Step:
    what: str
    body: str | None
    line: int


def readme_steps(text: str) -> list[Step]:
    """The README's markers and fenced blocks in order; raises if a block has no marker."""
    steps: list[Step] = []
    position = 0
    events = sorted(
        [(m.start(), "marker", m) for m in _MARKER.finditer(text)]
        + [(m.start(), "fence", m) for m in _FENCE.finditer(text)],
        key=lambda event: event[0],
    )
    pending: Step | None = None
    for start, kind, match in events:
        line = text.count("\n", 0, start) + 1
        if kind == "marker":
            if pending is not None:
                steps.append(pending)  # a marker that takes no block (stop)
            pending = Step(match["what"].strip(), None, line)
        else:
            # Other comments (another test's markers) may sit between the marker and its block.
            between = _OTHER_COMMENT.sub("", text[position:start])
            if pending is None or between.strip() != f"<!-- readme-test: {pending.what} -->":
                raise AssertionError(f"README.md line {line}: a code block without a readme-test marker")
            pending.body = match["body"]
            steps.append(pending)
            pending = None
        position = match.start() if kind == "marker" else match.end()
    if pending is not None:
        steps.append(pending)
    return steps


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _connectable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _clean_env(home: Path) -> dict[str, str]:
    """The environment of a new terminal: no virtual environment active, a HOME of its own."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "NAMESRV_ADDR")
        and not key.startswith("PYTEST_")
    }
    path = [
        entry
        for entry in env.get("PATH", "").split(os.pathsep)
        if entry and not (Path(entry).parent / "pyvenv.cfg").exists()
    ]
    env["PATH"] = os.pathsep.join(path)
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    env["HOME"] = str(home)
    return env


def _clone(target: Path) -> None:
    subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(target)], check=True, timeout=120)
    diff = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "diff", "--binary", "HEAD"], check=True, capture_output=True
    ).stdout
    if diff:
        subprocess.run(["git", "-C", str(target), "apply", "-"], input=diff, check=True)


@dataclass
class Readme:
    clone: Path
    env: dict[str, str]
    logs: Path
    network: netns.PrivateNetwork | None = None
    servers: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def port_free(self, port: int) -> bool:
        return _port_free(port) if self.network is None else self.network.call(lambda: _port_free(port))

    def connectable(self, port: int) -> bool:
        return _connectable(port) if self.network is None else self.network.call(lambda: _connectable(port))

    def argv(self, argv: list[str]) -> list[str]:
        return argv if self.network is None else self.network.argv(argv)

    def start(self, step: Step) -> None:
        assert step.body is not None
        self.stop()
        ports = [int(port) for port in step.what.split()[1:]]
        # Nothing else uses these ports on a CI machine; on a shared one another run of this
        # README may hold them for a while, or take them while this one installs .venv: wait a
        # bounded time for them (and start again if a server lost one), then fail naming it.
        deadline = time.monotonic() + PORT_WAIT_S
        for attempt in range(3):
            while taken := [port for port in ports if not self.port_free(port)]:
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"port {taken[0]} is in use (waited {PORT_WAIT_S:g} s): the README's commands "
                        f"need it (README.md line {step.line})"
                    )
                time.sleep(1)
            started = self._launch(step.body)
            failed = self._wait_listening(started, ports)
            if failed is None:
                return
            command, proc, log = failed
            text = log.read_text(errors="replace")
            if "address already in use" not in text or attempt == 2:
                pytest.fail(f"{command!r} exited with {proc.returncode}:\n{_tail(log)}")
            deadline = time.monotonic() + PORT_WAIT_S
            for entry in started:  # another program took a port meanwhile: start again
                if entry[1].poll() is None:
                    os.killpg(entry[1].pid, signal.SIGKILL)
                    entry[1].wait(10)
                self.servers.remove(entry)

    def _launch(self, body: str) -> list[tuple[str, subprocess.Popen[bytes], Path]]:
        """Each line of ``body`` in its own terminal session, in the background."""
        started = []
        for command in (line for line in body.splitlines() if line.strip()):
            log = self.logs / f"server-{len(self.servers)}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    self.argv(["bash", "-c", command]), cwd=self.clone, env=self.env,
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
            self.servers.append((command, proc, log))
            started.append((command, proc, log))
        return started

    def _wait_listening(
        self, started: list[tuple[str, subprocess.Popen[bytes], Path]], ports: list[int]
    ) -> tuple[str, subprocess.Popen[bytes], Path] | None:
        """None once ``ports`` are open by these servers; else the server that exited."""
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        # Listening, and by these processes (their logs say so): on a shared machine another
        # program may take a default port meanwhile, and must not pass for the README's server.
        while not all(self.connectable(port) for port in ports) or not _logged_listening(started, ports):
            for entry in started:
                if entry[1].poll() is not None:
                    return entry
            if time.monotonic() > deadline:
                pytest.fail(f"ports {ports} not open within {SERVER_START_TIMEOUT_S:g} s")
            time.sleep(0.2)
        return None

    def stop(self) -> None:
        """Ctrl-C to every running server (its whole terminal session); each must stop cleanly."""
        servers, self.servers = self.servers, []
        for _, proc, _ in servers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
        for command, proc, log in servers:
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
                pytest.fail(f"{command!r} did not stop within {STOP_TIMEOUT_S:g} s of Ctrl-C:\n{_tail(log)}")
            text = log.read_text(errors="replace")
            assert "Traceback" not in text and " stopped" in text, (
                f"{command!r} did not stop cleanly:\n{_tail(log)}"
            )

    def kill(self) -> None:
        for _, proc, _ in self.servers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    def run(self, step: Step) -> None:
        assert step.body is not None
        done = subprocess.run(
            self.argv(["bash", "-e", "-c", step.body]),
            cwd=self.clone,
            env=self.env,
            capture_output=True,
            timeout=RUN_TIMEOUT_S,
        )
        assert done.returncode == 0, (
            f"README.md line {step.line} exited with {done.returncode}:\n{step.body}\n"
            f"--- stdout\n{done.stdout.decode(errors='replace')[-4000:]}\n"
            f"--- stderr\n{done.stderr.decode(errors='replace')[-6000:]}"
        )


def _logged_listening(servers: list[tuple[str, subprocess.Popen[bytes], Path]], ports: list[int]) -> bool:
    logs = "".join(log.read_text(errors="replace") for _, _, log in servers)
    bound = {int(port) for port in re.findall(r"listening on \S+?:(\d+)", logs)}
    return set(ports) <= bound


def _tail(path: Path, lines: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def test_readme_markers_cover_every_block() -> None:
    steps = readme_steps((REPO_ROOT / "README.md").read_text())
    kinds = {step.what.split()[0] for step in steps}
    assert kinds <= {"background", "run", "file", "stop", "skip"}, kinds
    assert all(step.body is not None or step.what == "stop" for step in steps)
    assert steps[0].what.startswith("background") and steps[0].body is not None
    assert steps[0].body.startswith("make standalone")


def test_readme_runs_as_written_in_a_fresh_clone(tmp_path: Path) -> None:
    if shutil.which("git") is None or shutil.which("make") is None:
        pytest.skip("the README's set-up needs git and make")
    clone = tmp_path / "orbitmq"
    _clone(clone)
    home = tmp_path / "home"
    home.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    readme = Readme(clone, _clean_env(home), logs)
    steps = readme_steps((clone / "README.md").read_text())
    default_ports = {
        int(port) for step in steps if step.what.startswith("background") for port in step.what.split()[1:]
    }
    if any(not _port_free(port) for port in default_ports) and netns.available():
        # Another server holds the default ports: the set-up first (it needs the network), then
        # every block on a loopback of the test's own.
        done = subprocess.run(
            ["make", "install"],
            cwd=clone,
            env=readme.env,
            capture_output=True,
            timeout=SERVER_START_TIMEOUT_S,
        )
        assert done.returncode == 0, (
            f"make install exited with {done.returncode}:\n{done.stdout.decode(errors='replace')[-4000:]}{done.stderr.decode(errors='replace')[-4000:]}"
        )
        readme.network = netns.PrivateNetwork()
        print(
            f"default ports {sorted(default_ports)} taken here: the README runs in a private network namespace"
        )
    try:
        for step in steps:
            started = time.monotonic()
            kind = step.what.split()[0]
            if kind == "background":
                readme.start(step)
            elif kind == "run":
                readme.run(step)
            elif kind == "file":
                assert step.body is not None
                (clone / step.what.split()[1]).write_text(step.body)
            elif kind == "stop":
                readme.stop()
            # Shown when the test fails: how far it got, and where the time went.
            print(f"README.md line {step.line}: {step.what} ({time.monotonic() - started:.1f} s)")
        readme.stop()
    finally:
        readme.kill()
        if readme.network is not None:
            readme.network.close()
    # The C++ client logged where the README says.
    assert list((home / "logs" / "rocketmq-cpp").glob("*_rocketmq-cpp.log*"))
