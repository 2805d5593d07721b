"""``python -m orbitmq.bench fuzz --frames 1000000``: hostile frames against a real broker and name server.

Starts a name server and a broker (separate processes, 127.0.0.1, free ports, a temporary
directory), stores a set of seed messages, then sends ``--frames`` frames from the seeded fuzzer
(``_fuzz_frames``: Hypothesis strategies over every request code's header model, then byte and
field mutations) while a prober asks both servers a question every second. Afterwards, and
again after a SIGTERM restart and after a SIGKILL restart, the seed messages must read back
byte for byte; the store must pass ``python -m orbitmq.store.verify`` after each clean stop.

Prints frames/s, responses by code, the prober's worst answer time and failures, the distinct
exceptions the servers logged, their log growth per frame, and each server's resident memory
and open files before and after. Exit status 1 when a check fails. Needs Hypothesis (the
``test`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from orbitmq.protocol.codes import RequestCode, ResponseCode

START_TIMEOUT_S = 30.0
SEED_TOPIC = "FuzzSeedTopic"
SEED_MESSAGES = 64


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--frames", type=int, default=100_000, help="frames to send (default 100000)")
    parser.add_argument("--seed", type=int, default=20240611, help="fuzzer seed (the run replays from it)")
    parser.add_argument("--corpus", type=int, default=3000, help="frames drawn by Hypothesis before mutation")
    parser.add_argument("--connections", type=int, default=4, help="pipelined connections per server")
    parser.add_argument("--keep", action="store_true", help="keep the working directory (logs, store)")


class _Server:
    """A server subprocess with its log file."""

    def __init__(self, name: str, args: list[str], port: int, workdir: Path) -> None:
        self.name, self.args, self.port = name, args, port
        self.log_path = workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode}; see {self.log_path}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not listen within {START_TIMEOUT_S:g} s")

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)

    def log_bytes(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _servers(workdir: Path) -> tuple[_Server, _Server, Path]:
    namesrv_port, broker_port = _free_port(), _free_port()
    (workdir / "namesrv.conf").write_text(f"listenPort={namesrv_port}\nbindAddress=127.0.0.1\n")
    store = workdir / "store"
    (workdir / "broker.conf").write_text(
        "\n".join(
            [
                f"listenPort={broker_port}",
                "bindAddress=127.0.0.1",
                "brokerIP1=127.0.0.1",
                f"namesrvAddr=127.0.0.1:{namesrv_port}",
                f"storePathRootDir={store}",
                f"mapedFileSizeCommitLog={64 * 1024 * 1024}",
            ]
        )
        + "\n"
    )
    python = sys.executable
    namesrv = _Server(
        "namesrv",
        [python, "-m", "orbitmq.namesrv", "-c", str(workdir / "namesrv.conf")],
        namesrv_port,
        workdir,
    )
    broker = _Server(
        "broker", [python, "-m", "orbitmq.broker", "-c", str(workdir / "broker.conf")], broker_port, workdir
    )
    return namesrv, broker, store


def _verify(store: Path) -> tuple[bool, str]:
    """``python -m orbitmq.store.verify`` on a stopped store: (clean, its last output line)."""
    done = subprocess.run(
        [sys.executable, "-m", "orbitmq.store.verify", str(store)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode == 0, lines[-1] if lines else ""


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return str(code)


def run(args: argparse.Namespace) -> int:
    from orbitmq.bench import _fuzz_frames, _fuzz_run

    workdir = Path(tempfile.mkdtemp(prefix="orbitmq-fuzz-"))
    namesrv, broker, store = _servers(workdir)
    failures: list[str] = []
    try:
        namesrv.start()
        broker.start()
        rng = random.Random(args.seed)
        seeds = [rng.randbytes(rng.randint(1, 2048)) for _ in range(SEED_MESSAGES)]
        asyncio.run(_fuzz_run.seed_messages(broker.addr, SEED_TOPIC, seeds))
        before = {
            server.name: _fuzz_run.process_stats(server.proc.pid)
            for server in (namesrv, broker)
            if server.proc
        }
        logs_before = namesrv.log_bytes() + broker.log_bytes()
        generated = time.monotonic()
        corpus = _fuzz_frames.corpus(args.corpus, args.seed)
        print(
            f"fuzz: seed {args.seed}, corpus of {len(corpus)} frames drawn in {time.monotonic() - generated:.1f} s"
        )
        frames = _fuzz_frames.frames(corpus, args.frames, args.seed)
        stats = asyncio.run(
            _fuzz_run.fuzz(frames, broker.addr, namesrv.addr, SEED_TOPIC, connections=args.connections)
        )
        after = {
            server.name: _fuzz_run.process_stats(server.proc.pid)
            for server in (namesrv, broker)
            if server.proc
        }
        log_growth = namesrv.log_bytes() + broker.log_bytes() - logs_before
        _print_stats(stats, before, after, log_growth)
        failures += _check_run(stats)
        failures += _check_seeds(
            "after the run", asyncio.run(_fuzz_run.read_back(broker.addr, SEED_TOPIC)), seeds
        )
        for restart in ("SIGTERM", "SIGKILL"):
            broker.stop(signal.SIGTERM if restart == "SIGTERM" else signal.SIGKILL)
            if restart == "SIGTERM":
                clean, line = _verify(store)
                print(f"verify after SIGTERM: {'clean' if clean else 'FAILED'} ({line})")
                if not clean:
                    failures.append(f"store verify after SIGTERM: {line}")
            broker.start()
            read = asyncio.run(_fuzz_run.read_back(broker.addr, SEED_TOPIC))
            failures += _check_seeds(f"after a {restart} restart", read, seeds)
        broker.stop()
        clean, line = _verify(store)
        print(f"verify after the SIGKILL restart and a clean stop: {'clean' if clean else 'FAILED'} ({line})")
        if not clean:
            failures.append(f"store verify after the SIGKILL restart: {line}")
        exceptions: Counter[str] = Counter()
        for server in (namesrv, broker):
            exceptions += _fuzz_run.server_exceptions(server.log_path.read_text(errors="replace"))
        print(f"server-side exceptions: {len(exceptions)} distinct {dict(exceptions) or ''}")
        if exceptions:
            failures.append(f"servers logged exceptions: {dict(exceptions)}")
    finally:
        for server in (broker, namesrv):
            server.stop(signal.SIGKILL)
        if args.keep or failures:
            print(f"working directory kept: {workdir}")
        else:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    for failure in failures:
        print(f"FAILED: {failure}")
    print("fuzz: " + ("clean" if not failures else f"{len(failures)} check(s) failed"))
    return 1 if failures else 0


def _print_stats(
    stats: object, before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], log_growth: int
) -> None:
    from orbitmq.bench._fuzz_run import FuzzStats

    assert isinstance(stats, FuzzStats)
    print(
        f"frames: {stats.frames} in {stats.seconds:.1f} s = {stats.frames_per_s:,.0f} frames/s "
        f"({stats.closing_frames} expected to close their connection; unexpected closes {stats.unexpected_closes})"
    )
    codes = sorted(code for code in stats.frames_by_code if code >= 0)
    print(f"request codes sent: {len(codes)} ({', '.join(_request_name(code) for code in codes)})")
    responses = ", ".join(
        f"{_code_name(code)} {count}" for code, count in stats.responses_by_code.most_common()
    )
    print(f"responses: {sum(stats.responses_by_code.values())} ({responses})")
    print(
        f"prober: {stats.probes} probes, {len(stats.probe_failures)} failed, slowest {stats.probe_max_ms:.0f} ms"
    )
    for name in ("namesrv", "broker"):
        (rss_before, files_before), (rss_after, files_after) = before[name], after[name]
        print(
            f"{name}: RSS {rss_before / 2**20:.0f} -> {rss_after / 2**20:.0f} MiB, "
            f"open files {files_before} -> {files_after}"
        )
    print(f"log growth: {log_growth} bytes ({log_growth / max(stats.frames, 1):.2f} bytes per frame)")


def _request_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return str(code)


def _check_run(stats: object) -> list[str]:
    from orbitmq.bench._fuzz_run import FuzzStats

    assert isinstance(stats, FuzzStats)
    problems = []
    if stats.probe_failures:
        problems.append(f"prober failed {len(stats.probe_failures)} times: {stats.probe_failures[:3]}")
    return problems


def _check_seeds(when: str, read: list[bytes], seeds: list[bytes]) -> list[str]:
    if read == seeds:
        print(f"seed messages {when}: {len(read)} of {len(seeds)}, byte for byte")
        return []
    return [f"seed messages {when}: read {len(read)}, expected {len(seeds)} (or they differ)"]
