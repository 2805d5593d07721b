"""Fuzz tier: hostile HTTP requests against a real dashboard raise nothing, wedge nothing, lose nothing.

Method: a standalone and a dashboard run as processes (tests/support/processes.py); 64 seed
messages are stored first. The seeded generator (orbitmq.bench.fuzz_http.cases) sends
``REQUESTS`` raw requests over every route: malformed paths, names and request lines, bad
query parameters, form bodies (urlencoded, multipart, JSON, binary, oversized), bad methods and
odd headers, a share of the state-changing ones with the page's valid CSRF token; a prober asks
``/api/history`` every second. Afterwards: no 5xx but the cluster's 502, no unanswered request,
no traceback in the dashboard's log, the log grew by less than
``fuzz_http.LOG_BYTES_PER_REQUEST_MAX`` per request, and the seed messages read back byte for
byte. ``python -m orbitmq.bench fuzz-http --seed N --requests M`` replays a run at any length.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from orbitmq.bench import _fuzz_run, fuzz_http
from tests.integration.dashboard.conftest import start_dashboard
from tests.support.processes import start_standalone, wait_route

SEED = 2811
REQUESTS = 1500
SEED_TOPIC = "FuzzHttpTierSeed"


def test_fuzz_dashboard_survives_hostile_http_requests(tmp_path: Path) -> None:
    print(f"fuzz seed {SEED} (replay: python -m orbitmq.bench fuzz-http --seed {SEED} --requests {REQUESTS})")
    standalone = start_standalone(tmp_path, "--no-proxy")
    try:
        wait_route(standalone.addr, "TBW102", {"broker-a"})
        broker_addr = f"127.0.0.1:{standalone.extra_ports[0]}"
        rng = random.Random(SEED)
        seeds = [rng.randbytes(rng.randint(1, 4096)) for _ in range(64)]
        asyncio.run(_fuzz_run.seed_messages(broker_addr, SEED_TOPIC, seeds))
        dashboard = start_dashboard(tmp_path, standalone.addr, "--sample-interval-s", "1")
        try:
            cookie, token = asyncio.run(fuzz_http.fetch_token("127.0.0.1", dashboard.port))
            cases = list(fuzz_http.cases(REQUESTS, SEED, dashboard.port, cookie, token))
            kinds = {case.kind for case in cases}
            assert {"GET", "POST", "POST with token", "malformed request line"} <= kinds
            log_before = dashboard.log_path.stat().st_size
            stats = asyncio.run(fuzz_http.fuzz("127.0.0.1", dashboard.port, cases))
            log_growth = dashboard.log_path.stat().st_size - log_before
            print(
                f"{stats.requests} requests in {stats.seconds:.1f} s ({stats.requests_per_s:,.0f}/s), "
                f"answers {dict(stats.by_status)}, prober {stats.probes} probes, slowest {stats.probe_max_ms:.0f} ms, "
                f"log growth {log_growth} bytes"
            )
            assert stats.requests == REQUESTS
            assert {"200", "303", "400", "403", "404", "405"} <= set(stats.by_status)
            exceptions = _fuzz_run.server_exceptions(dashboard.log_path.read_text(errors="replace"))
            assert fuzz_http.check(stats, log_growth, exceptions) == []
            assert stats.probes >= 2
        finally:
            dashboard.stop()
        assert asyncio.run(_fuzz_run.read_back(broker_addr, SEED_TOPIC)) == seeds
    finally:
        standalone.kill()
