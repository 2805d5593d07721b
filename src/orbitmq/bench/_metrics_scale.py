"""/metrics on a broker with many topics: make the topics, scrape, and time other requests meanwhile.

:func:`send_to_topics` creates topics the way clients do, by sending one message to each new
topic (the broker creates it from ``TBW102``), pipelined on one connection. :func:`scrape_under_probe`
scrapes ``/metrics`` a few times (on a thread) while a prober sends GET_MAX_OFFSET to the broker
every few milliseconds, and reports each scrape's time and size and the prober's slowest answer:
a scrape that blocks the broker's event loop shows up as a slow probe. Used by
``python -m orbitmq.bench metrics --topics N`` and the integration tests of /metrics at scale.
"""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import GetMaxOffsetRequestHeader, SendMessageRequestHeader
from orbitmq.transport.connection import RemotingClient

__all__ = ["ScaleResult", "scrape_under_probe", "send_to_topics"]

PROBE_INTERVAL_S = 0.005


async def send_to_topics(broker_addr: str, count: int, prefix: str, concurrency: int = 64) -> None:
    """One 16-byte message to each of ``prefix0`` ... ``prefix<count-1>`` (created on send)."""
    client = RemotingClient()
    next_index = 0

    async def sender() -> None:
        nonlocal next_index
        while next_index < count:
            index = next_index
            next_index += 1
            header = SendMessageRequestHeader(
                producer_group="PG_METRICS_SCALE", topic=f"{prefix}{index}", queue_id=0
            )
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header.to_ext(), b"metrics-at-scale")
            response = await client.invoke(broker_addr, request, 30_000)
            if response.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"send to {prefix}{index}: {response.code} {response.remark}")

    try:
        await asyncio.gather(*(sender() for _ in range(concurrency)))
    finally:
        await client.close()


@dataclass
class ScaleResult:
    """What the scrapes cost and how the broker answered meanwhile."""

    scrape_s: list[float] = field(default_factory=list)
    scrape_bytes: list[int] = field(default_factory=list)
    scrape_errors: list[str] = field(default_factory=list)
    probes: int = 0
    probe_max_ms: float = 0.0
    idle_probes: int = 0
    idle_probe_max_ms: float = 0.0
    """The prober's slowest answer before the first scrape (what the broker does without scrapes)."""
    probe_failures: list[str] = field(default_factory=list)
    probe_ms: list[float] = field(default_factory=list)
    """Every answer's time during the scrapes (for percentiles)."""
    probe_max_ms_by_scrape: list[float] = field(default_factory=list)
    """The slowest answer that ended while each scrape ran (the first scrape of a broker reads
    every queue; the later ones only what moved)."""
    prober_late_max_ms: float = 0.0
    """How late the prober's own event loop ran a 5 ms timer at worst during the scrapes: a probe
    is timed on the prober's side, so a prober that the machine did not schedule for that long
    added it to some probe (a broker stall is then the rest, at least)."""


def _scrape(url: str, timeout_s: float) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        size = len(response.read())
    return time.perf_counter() - started, size


async def scrape_under_probe(
    broker_addr: str, url: str, probe_topic: str, scrapes: int, timeout_s: float = 60.0, idle_s: float = 0.0
) -> ScaleResult:
    """Scrape ``url`` ``scrapes`` times in a row while probing the broker (module docstring).

    With ``idle_s`` the prober first runs that long without scrapes (``idle_probe_max_ms``).
    """
    result = ScaleResult()
    scrape_index = 0
    client = RemotingClient()
    stop = asyncio.Event()
    header = GetMaxOffsetRequestHeader(topic=probe_topic, queue_id=0)

    async def probe() -> None:
        idle_until = time.perf_counter() + idle_s
        while time.perf_counter() < idle_until:
            started = time.perf_counter()
            request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, header.to_ext())
            await client.invoke(broker_addr, request, int(timeout_s * 1000))
            result.idle_probes += 1
            result.idle_probe_max_ms = max(result.idle_probe_max_ms, (time.perf_counter() - started) * 1000)
            await asyncio.sleep(PROBE_INTERVAL_S)
        scraping.set()
        while not stop.is_set():
            started = time.perf_counter()
            request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, header.to_ext())
            try:
                response = await client.invoke(broker_addr, request, int(timeout_s * 1000))
                if response.code != ResponseCode.SUCCESS:
                    result.probe_failures.append(f"code {response.code}: {response.remark}")
            except Exception as exc:  # noqa: BLE001 - a probe failure is a finding, not a crash
                result.probe_failures.append(f"{type(exc).__name__}: {exc}")
            result.probes += 1
            elapsed_ms = (time.perf_counter() - started) * 1000
            result.probe_ms.append(elapsed_ms)
            result.probe_max_ms = max(result.probe_max_ms, elapsed_ms)
            by_scrape = result.probe_max_ms_by_scrape
            if len(by_scrape) > scrape_index:
                by_scrape[scrape_index] = max(by_scrape[scrape_index], elapsed_ms)
            await asyncio.sleep(PROBE_INTERVAL_S)

    async def watch_prober() -> None:
        await scraping.wait()
        while not stop.is_set():
            due = time.perf_counter() + PROBE_INTERVAL_S
            await asyncio.sleep(PROBE_INTERVAL_S)
            late_ms = (time.perf_counter() - due) * 1000
            result.prober_late_max_ms = max(result.prober_late_max_ms, late_ms)

    try:
        # A first answer outside the measurement: the connection is opened here.
        await client.invoke(broker_addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, header.to_ext()))
        scraping = asyncio.Event()
        prober = asyncio.create_task(probe())
        watcher = asyncio.create_task(watch_prober())
        await scraping.wait()
        for index in range(scrapes):
            scrape_index = index
            result.probe_max_ms_by_scrape.append(0.0)
            try:
                seconds, size = await asyncio.to_thread(_scrape, url, timeout_s)
                result.scrape_s.append(seconds)
                result.scrape_bytes.append(size)
            except (OSError, urllib.error.URLError) as exc:
                result.scrape_errors.append(str(exc))
        stop.set()
        await prober
        await watcher
    finally:
        await client.close()
    return result
