"""Dashboard pages at scale: 1,000 topics and 500 consumer groups, each page's load time.

A temporary ``orbitmq standalone`` gets ``--topics`` topics (8 queues each) and ``--groups``
consumer groups, group *i* with committed offsets on topic *i* and ten messages behind, all
written with raw admin requests (UPDATE_AND_CREATE_TOPIC, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
a batch send per topic, UPDATE_CONSUMER_OFFSET). Then ``orbitmq dashboard`` is started over it
and each page is fetched ``--repeat`` times over HTTP; printed per page: the median and the
slowest load, and a verdict against the 1 s target. The server side renders complete pages
(no requests after load besides the cluster page's chart data), so the HTTP time is the
page's time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

from orbitmq.bench._servers import _free_ports, start_standalone
from orbitmq.client.admin import AdminClient
from orbitmq.client.producer import Producer
from orbitmq.model.message import Message
from orbitmq.protocol.codes import RequestCode, ResponseCode
from orbitmq.protocol.command import RemotingCommand
from orbitmq.protocol.headers import CreateTopicRequestHeader, UpdateConsumerOffsetRequestHeader
from orbitmq.transport.connection import RemotingClient
from orbitmq.transport.runner import new_event_loop

__all__ = ["add_arguments", "run"]

TARGET_MS = 1000.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topics", type=int, default=1000, help="topics to create (1000)")
    parser.add_argument("--groups", type=int, default=500, help="consumer groups to create (500)")
    parser.add_argument("--repeat", type=int, default=5, help="loads of each page (5)")


async def _populate(namesrv: str, broker: str, topics: int, groups: int) -> None:
    client = RemotingClient()
    gate = asyncio.Semaphore(64)

    async def call(code: int, ext: dict[str, str], body: bytes = b"") -> None:
        async with gate:
            response = await client.invoke(broker, RemotingCommand.request(code, ext, body), 30_000)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"request {code} failed: {response.remark}")

    names = [f"ScaleTopic_{index:04d}" for index in range(topics)]
    try:
        await asyncio.gather(
            *(
                call(RequestCode.UPDATE_AND_CREATE_TOPIC, CreateTopicRequestHeader(name).to_ext())
                for name in names
            )
        )
        await asyncio.gather(
            *(
                call(
                    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                    {},
                    orjson.dumps({"groupName": f"ScaleGroup_{index:04d}", "consumeEnable": True}),
                )
                for index in range(groups)
            )
        )
        async with AdminClient(namesrv) as admin:
            deadline = time.monotonic() + 120
            while len(await admin.list_topics()) < topics and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
        async with Producer("PG_SCALE", namesrv) as producer:
            for name in names[:groups]:
                await producer.send_batch([Message(name, b"scale") for _ in range(10)])
        await asyncio.gather(
            *(
                call(
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    UpdateConsumerOffsetRequestHeader(
                        f"ScaleGroup_{index:04d}", names[index], queue_id, 0
                    ).to_ext(),
                )
                for index in range(groups)
                for queue_id in range(8)
            )
        )
    finally:
        await client.close()


def _load_ms(url: str, expect: str = "") -> float:
    """Milliseconds to load ``url`` completely; the page must contain ``expect``."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        page = response.read().decode()
    elapsed_ms = (time.perf_counter() - started) * 1000
    if expect not in page:
        raise RuntimeError(f"{url}: the page does not show {expect!r}")
    return elapsed_ms


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by ``args``; returns the exit status."""
    with tempfile.TemporaryDirectory(prefix="orbitmq-dashboard-") as workdir:
        proc, namesrv_port, broker_port = start_standalone(Path(workdir))
        namesrv = f"127.0.0.1:{namesrv_port}"
        dashboard = None
        try:
            started = time.perf_counter()
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                runner.run(_populate(namesrv, f"127.0.0.1:{broker_port}", args.topics, args.groups))
            print(
                f"{args.topics} topics and {args.groups} groups written in {time.perf_counter() - started:.1f} s"
            )
            (port,) = _free_ports(1)
            dashboard = subprocess.Popen(
                [sys.executable, "-m", "orbitmq.dashboard", "--namesrv", namesrv, "--port", str(port), "--log-level", "WARNING"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    _load_ms(base + "/dlq")
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            # Each page with a piece of content it must show, so a fast error page cannot pass.
            lag = '<td class="num lag">10</td>'
            pages = [
                ("/", "broker-a"), ("/topics", "ScaleTopic_0000"), ("/topics?page=5", "ScaleTopic_09"),
                ("/topics?kind=normal&q=ScaleTopic_09", "ScaleTopic_0999"), ("/groups", lag),
                ("/groups?page=10", "ScaleGroup_04"), ("/groups/ScaleGroup_0042", "ScaleTopic_0042"),
                ("/topics/ScaleTopic_0042", "ScaleGroup_0042"),
                ("/messages?mode=time&topic=ScaleTopic_0042", 'id="results"'),
                ("/messages?mode=key&topic=ScaleTopic_0042&key=none", "is indexed under key"), ("/dlq", "Dead-letter"),
            ]  # fmt: skip
            if args.topics < 1000 or args.groups < 500:
                pages = pages[:2]
            slowest = 0.0
            for page, expect in pages:
                times = [_load_ms(base + page, expect) for _ in range(args.repeat)]
                slowest = max(slowest, statistics.median(times))
                print(f"  {page:<48} median {statistics.median(times):7.1f} ms  max {max(times):7.1f} ms")
            verdict = "meets" if slowest < TARGET_MS else "misses"
            print(f"verdict: slowest page median {slowest:.1f} ms {verdict} the {TARGET_MS:.0f} ms target")
            return 0
        finally:
            if dashboard is not None:
                dashboard.terminate()
                dashboard.wait(30)
            proc.terminate()
            proc.wait(30)
