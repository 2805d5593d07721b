"""``python -m orbitmq.bench fuzz-grpc --calls 100000``: hostile calls against the gRPC port.

Starts an ``orbitmq standalone`` (name server, broker and gRPC proxy in one process, a
temporary directory, free ports, ``maxMessageSize`` from ``--max-message-size``), stores seed
messages through the remoting port, then sends ``--calls`` calls drawn by the seeded gRPC
fuzzer (``_fuzz_grpc``: every RPC of MessagingService, Telemetry streams included; random,
mutated, foreign and oversized requests) while a prober asks QueryRoute every second.
Afterwards the seed messages must read back byte for byte, also after a SIGTERM and a SIGKILL
restart.

Prints calls/s, answers by gRPC status and by in-band code, the prober's slowest answer and
failures, the exceptions the server logged, its log growth per call, and its resident memory
and open files before and after. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from orbitmq.bench import _fuzz_grpc, _fuzz_run, _servers
from orbitmq.proxy.wire import max_receive_bytes

__all__ = ["add_arguments", "run"]

SEED_TOPIC = "FuzzGrpcSeedTopic"
SEED_MESSAGES = 64
LOG_BYTES_PER_CALL_MAX = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", type=int, default=100_000, help="calls to send (default 100000)")
    parser.add_argument("--seed", type=int, default=20261128, help="fuzzer seed (the run replays from it)")
    parser.add_argument("--concurrency", type=int, default=32, help="calls in flight")
    parser.add_argument(
        "--max-message-size",
        type=int,
        default=65536,
        help="the server's maxMessageSize (small: cheap oversized calls)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the working directory (log, store)")


def _start(workdir: Path, conf: Path, log_path: Path) -> tuple[subprocess.Popen[bytes], int, int]:
    proc, _, broker_port, grpc_port = _servers._start(workdir, True, "-c", str(conf), log_path=log_path)
    return proc, broker_port, grpc_port


def _stop(proc: subprocess.Popen[bytes], sig: int) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        proc.wait(60)


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="orbitmq-fuzz-grpc-"))
    conf = workdir / "standalone.conf"
    conf.write_text(f"maxMessageSize={args.max_message_size}\n")
    log_path = workdir / "standalone.log"
    failures: list[str] = []
    proc, broker_port, grpc_port = _start(workdir, conf, log_path)
    broker_addr = f"127.0.0.1:{broker_port}"
    try:
        rng = random.Random(args.seed)
        seeds = [rng.randbytes(rng.randint(1, 2048)) for _ in range(SEED_MESSAGES)]
        asyncio.run(_fuzz_run.seed_messages(broker_addr, SEED_TOPIC, seeds))
        before = _fuzz_run.process_stats(proc.pid)
        log_before = log_path.stat().st_size
        drawing = time.monotonic()
        drawn = _fuzz_grpc.requests(
            args.calls, args.seed, args.max_message_size, max_receive_bytes(args.max_message_size)
        )
        print(f"fuzz-grpc: seed {args.seed}, {len(drawn)} calls drawn in {time.monotonic() - drawing:.1f} s")
        stats = asyncio.run(
            _fuzz_grpc.fuzz(drawn, f"127.0.0.1:{grpc_port}", SEED_TOPIC, concurrency=args.concurrency)
        )
        after = _fuzz_run.process_stats(proc.pid)
        log_growth = log_path.stat().st_size - log_before
        print(f"calls: {stats.calls} in {stats.seconds:.1f} s = {stats.calls_per_s:,.0f} calls/s")
        print(f"calls by kind: {dict(stats.calls_by_kind.most_common())}")
        print(f"RPCs: {len(stats.calls_by_rpc)} ({', '.join(sorted(stats.calls_by_rpc))})")
        print(f"gRPC status: {dict(stats.grpc_codes.most_common())}")
        print(f"in-band codes: {dict(stats.in_band_codes.most_common())}")
        print(f"Telemetry commands answered: {stats.telemetry_commands}")
        print(
            f"prober: {stats.probes} probes, {len(stats.probe_failures)} failed, slowest {stats.probe_max_ms:.0f} ms"
        )
        print(
            f"server: RSS {before[0] / 2**20:.0f} -> {after[0] / 2**20:.0f} MiB, open files {before[1]} -> {after[1]}"
        )
        print(f"log growth: {log_growth} bytes ({log_growth / max(stats.calls, 1):.2f} bytes per call)")
        if stats.server_errors:
            failures.append(f"grpc answered UNKNOWN/INTERNAL: {dict(stats.server_error_details)}")
        if stats.probe_failures:
            failures.append(f"prober failed {len(stats.probe_failures)} times: {stats.probe_failures[:3]}")
        if log_growth > LOG_BYTES_PER_CALL_MAX * max(stats.calls, 1):
            failures.append(f"log grew {log_growth} bytes, over {LOG_BYTES_PER_CALL_MAX} per call")
        failures += _check_seeds(
            "after the run", asyncio.run(_fuzz_run.read_back(broker_addr, SEED_TOPIC)), seeds
        )
        for restart, sig in (("SIGTERM", signal.SIGTERM), ("SIGKILL", signal.SIGKILL)):
            _stop(proc, sig)
            proc, broker_port, grpc_port = _start(workdir, conf, workdir / f"standalone-{restart}.log")
            broker_addr = f"127.0.0.1:{broker_port}"
            read = asyncio.run(_fuzz_run.read_back(broker_addr, SEED_TOPIC))
            failures += _check_seeds(f"after a {restart} restart", read, seeds)
        exceptions = _fuzz_run.server_exceptions(log_path.read_text(errors="replace"))
        print(f"server-side exceptions: {len(exceptions)} distinct {dict(exceptions) or ''}")
        if exceptions:
            failures.append(f"server logged exceptions: {dict(exceptions)}")
    finally:
        _stop(proc, signal.SIGKILL)
        if args.keep or failures:
            print(f"working directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    for failure in failures:
        print(f"FAILED: {failure}")
    print("fuzz-grpc: " + ("clean" if not failures else f"{len(failures)} check(s) failed"))
    return 1 if failures else 0


def _check_seeds(when: str, read: list[bytes], seeds: list[bytes]) -> list[str]:
    if read == seeds:
        print(f"seed messages {when}: {len(read)} of {len(seeds)}, byte for byte")
        return []
    return [f"seed messages {when}: read {len(read)}, expected {len(seeds)} (or they differ)"]
