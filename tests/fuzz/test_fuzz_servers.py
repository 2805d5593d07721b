"""Fuzz tier: 100,000 hostile frames against a real broker and name server lose, corrupt and wedge nothing.

Method: a name server and a broker run as processes (tests/support/processes.py). 64 seed
messages are stored first. The seeded fuzzer (orbitmq.bench._fuzz_frames: Hypothesis
strategies over every request code's header model, then field and byte mutations) sends
100,000 frames, JSON and binary headers, pipelined on a few connections per server (a frame
expected to cost its connection gets one of its own), while a prober asks both servers a
question every second. Afterwards, and again after a SIGTERM restart and after a SIGKILL
restart, the seed messages read back byte for byte; ``python -m orbitmq.store.verify`` passes
after each clean stop; no traceback is in either log; and the logs grew by less than
``LOG_BYTES_PER_FRAME_MAX`` per frame (bad input is logged rate-limited, never per request).
The seed is printed; ``python -m orbitmq.bench fuzz --seed N`` replays a run at any length.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from pathlib import Path

from orbitmq.bench import _fuzz_frames, _fuzz_run
from orbitmq.broker.handler_table import build_handler_table
from orbitmq.broker.handlers.acl import AclHandlers
from orbitmq.broker.handlers.client_manage import ClientManageHandlers
from orbitmq.namesrv.handlers import NamesrvHandlers
from orbitmq.namesrv.route_table import RouteTable
from tests.support.processes import ServerProcess, start_broker, start_namesrv

SEED = 1307
FRAMES = 100_000
CORPUS = 600
SEED_TOPIC = "FuzzTierSeed"
LOG_BYTES_PER_FRAME_MAX = 10
FRAMES_PER_CODE_MIN = 100


def _registered_codes() -> tuple[set[int], set[int]]:
    """The request codes each server has a handler for (the tables only keep bound methods)."""
    broker = set(build_handler_table(None, ClientManageHandlers(None)))  # type: ignore[arg-type]
    broker |= set(AclHandlers(None, None, str).handler_table())  # type: ignore[arg-type]
    namesrv = set(NamesrvHandlers(RouteTable()).table())
    return broker, namesrv


def _verify(store: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "orbitmq.store.verify", str(store)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done.stdout


def _read_back(broker: ServerProcess) -> list[bytes]:
    return asyncio.run(_fuzz_run.read_back(broker.addr, SEED_TOPIC))


def test_fuzz_servers_survive_100k_hostile_frames(tmp_path: Path) -> None:
    print(f"fuzz seed {SEED} (replay: python -m orbitmq.bench fuzz --seed {SEED} --corpus {CORPUS})")
    broker_codes, namesrv_codes = _registered_codes()
    assert set(_fuzz_frames.BROKER_REQUESTS) == broker_codes
    assert set(_fuzz_frames.NAMESRV_REQUESTS) == namesrv_codes
    namesrv = start_namesrv(tmp_path)
    broker = start_broker(tmp_path, namesrv.addr)
    store = tmp_path / "broker-a" / "store"
    try:
        rng = random.Random(SEED)
        seeds = [rng.randbytes(rng.randint(1, 4096)) for _ in range(64)]
        asyncio.run(_fuzz_run.seed_messages(broker.addr, SEED_TOPIC, seeds))
        log_bytes_before = namesrv.log_path.stat().st_size + broker.log_path.stat().st_size

        frames = list(_fuzz_frames.frames(_fuzz_frames.corpus(CORPUS, SEED), FRAMES, SEED))
        codes = {frame.code for frame in frames}
        by_target = {target: [f.code for f in frames if f.target == target] for target in (0, 1)}
        for target, registered in (
            (_fuzz_frames.BROKER, broker_codes),
            (_fuzz_frames.NAMESRV, namesrv_codes),
        ):
            for code in registered:
                assert by_target[target].count(code) >= FRAMES_PER_CODE_MIN, code
        assert codes >= broker_codes | namesrv_codes
        layouts = {frame.data[4] for frame in frames if not frame.closes}
        assert {0, 1} <= layouts  # JSON and binary ("ROCKETMQ") headers

        stats = asyncio.run(_fuzz_run.fuzz(frames, broker.addr, namesrv.addr, SEED_TOPIC))
        print(
            f"{stats.frames} frames in {stats.seconds:.1f} s ({stats.frames_per_s:,.0f}/s), "
            f"{sum(stats.responses_by_code.values())} responses {dict(stats.responses_by_code)}, "
            f"prober {stats.probes} probes, slowest {stats.probe_max_ms:.0f} ms"
        )
        assert stats.frames == FRAMES
        assert stats.probes >= 2 and not stats.probe_failures, stats.probe_failures[:5]
        assert stats.unexpected_closes == 0
        # Most frames are answered (the rest: oneway, parked pulls, frames that close their connection).
        assert sum(stats.responses_by_code.values()) > FRAMES // 2
        assert _read_back(broker) == seeds

        log_growth = namesrv.log_path.stat().st_size + broker.log_path.stat().st_size - log_bytes_before
        assert log_growth < LOG_BYTES_PER_FRAME_MAX * FRAMES, log_growth

        assert broker.stop() == 0
        _verify(store)
        broker.start()
        assert _read_back(broker) == seeds
        broker.kill()
        broker.start()
        assert _read_back(broker) == seeds
        assert broker.stop() == 0
        _verify(store)
        for server in (namesrv, broker):
            exceptions = _fuzz_run.server_exceptions(server.log_path.read_text(errors="replace"))
            assert not exceptions, (server.name, exceptions, server.log()[-3000:])
    finally:
        broker.kill()
        namesrv.kill()
