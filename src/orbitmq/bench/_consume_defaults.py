"""``bench consume --compare-defaults``: consumers left at their defaults beside the tuned one.

Most users never tune a consumer: they write it as RocketMQ's documentation does, with
``pullBatchSize`` 32 and ``consumeMessageBatchMaxSize`` 1 (one message per listener call). On
one backlog (the prefill), each consumer below reads every message from the first offset, in
a fresh consumer group, one after the other:

- ``push defaults``: a :class:`PushConsumer` with no setting but the start offset, and an
  ``async def`` listener that counts;
- ``push defaults (def)``: the same with a plain ``def`` listener (run on the consume threads);
- ``pull defaults``: a :class:`PullConsumer` with no setting but the start offset, polled in
  a loop;
- ``push tuned``: the PushConsumer as ``bench compare`` tunes it (pulls of 1,024, listener
  batches of 256, 4 consume tasks);
- ``C++ push defaults``: the real RocketMQ C++ client (``librocketmq.so`` from PyPI's
  ``rocketmq`` wheel, the test extra) in a child process at its default settings, with a C
  callback that counts (``_cpp_consume_native.c``, compiled at run time with ``cc``);
- ``C++ push defaults (py)``: the same client through its Python binding, a Python callback
  that counts (``orbitmq.bench._cpp_consume``): the binding's cost per message shows here;
- ``Java push defaults``: Apache RocketMQ's Java ``DefaultMQPushConsumer`` (5.5.0, from
  Maven Central into ``.cache/m2``) in a JVM of its own at its defaults, a listener that counts
  (``orbitmq.bench._java_consume``);
- ``Go push defaults``: Apache's Go client (``rocketmq-client-go/v2``, pinned as the interop
  tier pins it, built with ``go`` into ``.cache/bench-go``) as a push consumer at its defaults
  in a process of its own, a listener that counts (``orbitmq.bench._go_consume``).

The C++ lines are skipped with a message when the package (or a C compiler) is absent, the
Java line when java, javac or mvn is, the Go line when go is or its build fails; ``--no-cpp``,
``--no-java`` and ``--no-go`` leave them out.

Each line gives msgs/s over the whole run (from the consumer's construction, start-up and
rebalance included, to the last message) and steady (first message to last), the ratio of
the steady rate to the tuned PushConsumer's, and the CPU microseconds per message spent by the
consumer's process and by the server (when the benchmark started it). With ``--rounds N`` the
consumers take turns N times and the medians are printed (each ratio against the tuned
consumer of its own round): on a machine shared with other work, the load drifts between
consumers, and the CPU per message is the steadier figure.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orbitmq.bench._client_drivers import DriverResult
from orbitmq.bench._credentials import client_options
from orbitmq.bench._go_consume import go_push_consume
from orbitmq.bench._java_consume import java_push_consume
from orbitmq.bench._peers import process_cpu_s
from orbitmq.client.pull_consumer import PullConsumer
from orbitmq.client.push_consumer import ConsumeResult, PushConsumer
from orbitmq.model.heartbeat import ConsumeFromWhere
from orbitmq.model.message import MessageExt

__all__ = ["TUNED_PUSH", "ConsumerRun", "compare_defaults", "defaults_groups", "print_defaults_table"]

TUNED_PUSH: dict[str, Any] = {
    "pull_batch_size": 1024,
    "consume_message_batch_max_size": 256,
    "consume_thread_min": 1,
    "consume_thread_max": 4,
    "pull_threshold_for_queue": 4096,
}
"""How ``bench compare`` tunes its PushConsumer (``orbitmq.bench._orbit_peer``)."""
TARGET_RATIO = 0.7
CPP_INSTALL_HINT = "the C++ client is PyPI's rocketmq==0.4.4: pip install -e '.[test]'"
_FROM_FIRST = {"consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET}
_NAMES = (
    "push defaults",
    "push defaults (def)",
    "pull defaults",
    "push tuned",
    "C++ push defaults",
    "C++ push defaults (py)",
    "Java push defaults",
    "Go push defaults",
)
_CPP_NAMES = frozenset(_NAMES[4:6])


def _group(name: str, round_index: int) -> str:
    """A fresh group per consumer and round: each reads the backlog from its start."""
    return f"bench-defaults-{round_index + 1}-" + "".join(c if c.isalnum() else "-" for c in name).strip("-")


def defaults_groups(rounds: int) -> tuple[str, ...]:
    """The consumer groups of the comparison (their %RETRY% topics are removed afterwards)."""
    return tuple(_group(name, index) for index in range(max(rounds, 1)) for name in _NAMES)


@dataclass(slots=True)
class ConsumerRun:
    """One consumer's read of the backlog."""

    name: str
    count: int = 0
    started: float = 0.0
    first: float = 0.0
    last: float = 0.0
    skipped: str = ""
    client_cpu_s: float = 0.0
    server_cpu_s: float | None = None

    def add(self, count: int) -> None:
        """``count`` more messages (the clock is read at the first only: see :meth:`stop`)."""
        if not self.count:
            self.first = time.monotonic()
        self.count += count

    def stop(self) -> None:
        """The last message is in (or the run ended without it): its time."""
        if not self.last:
            self.last = time.monotonic()

    @property
    def total_rate(self) -> float:
        return self.count / max(self.last - self.started, 1e-9) if self.count else 0.0

    @property
    def steady_rate(self) -> float:
        return self.count / max(self.last - self.first, 1e-9) if self.count > 1 else 0.0


async def compare_defaults(
    namesrv: str, topic: str, args: argparse.Namespace, server_pid: int | None = None
) -> list[list[ConsumerRun]]:
    """``--rounds`` rounds of every consumer of the module docstring over the ``--prefill``
    messages of ``topic`` (each round in the same order, so that a machine whose load drifts
    weighs on every consumer alike).

    With ``server_pid`` (a server this benchmark started) each run also gets the CPU seconds
    that process spent meanwhile.
    """
    goal = args.count or args.prefill
    timeout_s = args.duration_s
    options = client_options(args)
    consumers: list[tuple[str, Callable[[int], Awaitable[ConsumerRun]], bool]] = [
        (
            _NAMES[0],
            lambda at: _push(namesrv, topic, _NAMES[0], at, goal, timeout_s, options, asynchronous=True),
            True,
        ),
        (
            _NAMES[1],
            lambda at: _push(namesrv, topic, _NAMES[1], at, goal, timeout_s, options, asynchronous=False),
            True,
        ),
        (_NAMES[2], lambda at: _pull(namesrv, topic, _NAMES[2], at, goal, timeout_s, options), True),
        (
            _NAMES[3],
            lambda at: _push(
                namesrv, topic, _NAMES[3], at, goal, timeout_s, {**options, **TUNED_PUSH}, asynchronous=True
            ),
            True,
        ),
        (
            _NAMES[4],
            lambda at: asyncio.to_thread(
                _cpp_push, namesrv, topic, at, goal, timeout_s, options, native=True
            ),
            False,
        ),
        (
            _NAMES[5],
            lambda at: asyncio.to_thread(
                _cpp_push, namesrv, topic, at, goal, timeout_s, options, native=False
            ),
            False,
        ),
        (
            _NAMES[6],
            lambda at: asyncio.to_thread(
                _driver_push,
                _NAMES[6],
                "Java",
                java_push_consume,
                namesrv,
                topic,
                at,
                goal,
                timeout_s,
                options,
            ),
            False,
        ),
        (
            _NAMES[7],
            lambda at: asyncio.to_thread(
                _driver_push, _NAMES[7], "Go", go_push_consume, namesrv, topic, at, goal, timeout_s, options
            ),
            False,
        ),
    ]
    left_out = {name: "--no-cpp" for name in _CPP_NAMES if args.no_cpp}
    if args.no_java:
        left_out[_NAMES[6]] = "--no-java"
    if args.no_go:
        left_out[_NAMES[7]] = "--no-go"
    rounds = []
    for round_index in range(max(args.rounds, 1)):
        runs = []
        for name, consume, in_process in consumers:
            if name in left_out:
                runs.append(ConsumerRun(name, skipped=left_out[name]))
                continue
            server_before = process_cpu_s(server_pid) if server_pid is not None else 0.0
            client_before = time.process_time()
            run = await consume(round_index)
            if in_process:
                run.client_cpu_s = time.process_time() - client_before
            if server_pid is not None:
                run.server_cpu_s = process_cpu_s(server_pid) - server_before
            runs.append(run)
        if args.rounds > 1:
            tuned = runs[3].steady_rate
            ratios = ", ".join(
                f"{run.name} {run.steady_rate / tuned:.2f}x" for run in runs if tuned and run.count
            )
            print(f"round {round_index + 1} of {args.rounds}: {ratios}", flush=True)
        rounds.append(runs)
    return rounds


async def _push(
    namesrv: str,
    topic: str,
    name: str,
    round_index: int,
    goal: int,
    timeout_s: float,
    settings: dict[str, Any],
    *,
    asynchronous: bool,
) -> ConsumerRun:
    run = ConsumerRun(name, started=time.monotonic())
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    lock = threading.Lock()

    # The listeners count; the clock is read at the first and the last message only, as
    # reading it on every call would weigh on the consumers called once per message alone.
    async def on_messages(messages: list[MessageExt]) -> ConsumeResult:
        run.add(len(messages))
        if run.count >= goal:
            run.stop()
            done.set()
        return ConsumeResult.CONSUME_SUCCESS

    def on_messages_plain(messages: list[MessageExt]) -> ConsumeResult:
        with lock:  # several consume threads call at once
            run.add(len(messages))
            finished = run.count >= goal
            if finished:
                run.stop()
        if finished:
            loop.call_soon_threadsafe(done.set)
        return ConsumeResult.CONSUME_SUCCESS

    consumer = PushConsumer(
        _group(name, round_index),
        namesrv,
        on_messages if asynchronous else on_messages_plain,
        **{**_FROM_FIRST, **settings},
    )
    consumer.subscribe(topic)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), timeout_s)
    except TimeoutError:
        pass
    finally:
        run.stop()
        await consumer.shutdown()
    return run


async def _pull(
    namesrv: str,
    topic: str,
    name: str,
    round_index: int,
    goal: int,
    timeout_s: float,
    settings: dict[str, Any],
) -> ConsumerRun:
    run = ConsumerRun(name, started=time.monotonic())
    consumer = PullConsumer(_group(name, round_index), namesrv, **{**_FROM_FIRST, **settings})
    await consumer.subscribe(topic)
    await consumer.start()
    deadline = run.started + timeout_s
    try:
        while run.count < goal and time.monotonic() < deadline:
            messages = await consumer.poll(500)
            if messages:
                run.add(len(messages))
    finally:
        run.stop()
        await consumer.shutdown()
    return run


def _cpp_push(
    namesrv: str,
    topic: str,
    round_index: int,
    goal: int,
    timeout_s: float,
    options: dict[str, Any],
    *,
    native: bool,
) -> ConsumerRun:
    """The C++ client's PushConsumer at its defaults, in a child process (it may crash alone):
    with a C callback (``_cpp_consume_native.c``, compiled here) or through its Python binding."""
    run = ConsumerRun(_NAMES[4] if native else _NAMES[5])
    spec = importlib.util.find_spec("rocketmq")
    if spec is None or not spec.submodule_search_locations:
        run.skipped = CPP_INSTALL_HINT
        return run
    if options:
        run.skipped = "the benchmark passes no credentials or TLS to the C++ client"
        return run
    library_dir = Path(next(iter(spec.submodule_search_locations)))
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-cpp-") as home:
        arguments = [namesrv, topic, _group(run.name, round_index), str(goal), str(timeout_s)]
        if native:
            program = _compile_native(library_dir, Path(home))
            if isinstance(program, str):
                run.skipped = program
                return run
            command = [str(program), *arguments]
        else:
            flags = ("--namesrv", "--topic", "--group", "--count", "--timeout-s")
            named = [item for pair in zip(flags, arguments, strict=True) for item in pair]
            command = [sys.executable, "-m", "orbitmq.bench._cpp_consume", *named]
        # HOME: the client writes its logs and local offset files under it.
        env = {**os.environ, "HOME": home}
        run.started = time.monotonic()
        try:
            done = subprocess.run(command, env=env, capture_output=True, timeout=timeout_s + 60)
        except subprocess.TimeoutExpired:
            run.skipped = f"the C++ consumer did not exit within {timeout_s + 60:g} s"
            return run
    lines = [line for line in done.stdout.decode(errors="replace").splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        run.skipped = f"the C++ consumer failed (exit {done.returncode}): {tail[0][:200]}"
        return run
    result = json.loads(lines[-1])
    # The child's clock (CLOCK_MONOTONIC, as time.monotonic) timed its start and its messages.
    run.count = int(result["count"])
    run.client_cpu_s = float(result["cpu_s"])
    run.started, run.first, run.last = (float(result[key]) for key in ("started", "first", "last"))
    return run


def _driver_push(
    name: str,
    client: str,
    driver: Callable[[str, str, str, int, float], DriverResult],
    namesrv: str,
    topic: str,
    round_index: int,
    goal: int,
    timeout_s: float,
    options: dict[str, Any],
) -> ConsumerRun:
    """A real client's push consumer at its defaults, run by ``driver`` in a process of its own
    (``orbitmq.bench._java_consume``, ``orbitmq.bench._go_consume``)."""
    run = ConsumerRun(name)
    if options:
        run.skipped = f"the benchmark passes no credentials or TLS to the {client} client"
        return run
    result = driver(namesrv, topic, _group(run.name, round_index), goal, timeout_s)
    if result.skipped:
        run.skipped = result.skipped
        return run
    # The driver's clock (CLOCK_MONOTONIC, as time.monotonic: the JVM's System.nanoTime, Go's
    # runtime clock) timed its run.
    run.count = result.count
    run.client_cpu_s = result.cpu_s
    run.started, run.first, run.last = result.started, result.first, result.last
    return run


def _compile_native(library_dir: Path, workdir: Path) -> Path | str:
    """The C driver built against ``library_dir``'s librocketmq.so, or why it cannot be."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return "no C compiler (cc) to build the C++ client's C driver"
    if not (library_dir / "librocketmq.so").exists():
        return f"no librocketmq.so in {library_dir}"
    program = workdir / "cpp_consume_native"
    source = Path(__file__).with_name("_cpp_consume_native.c")
    command = [
        compiler, "-O2", "-std=c11", "-o", str(program), str(source),
        f"-L{library_dir}", "-l:librocketmq.so", f"-Wl,-rpath,{library_dir}", "-lpthread",
    ]  # fmt: skip
    built = subprocess.run(command, capture_output=True, timeout=120)
    if built.returncode != 0:
        error = built.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return f"the C++ client's C driver did not compile: {error[0][:200]}"
    return program


def print_defaults_table(rounds: list[list[ConsumerRun]], goal: int, size: int) -> int:
    """The table (medians over the rounds); exit status 1 when a consumer read fewer than
    ``goal`` messages in a round."""
    print(
        f"\nconsumers over a backlog of {goal:,} x {size} B, medians of {len(rounds)} round(s) "
        "(ratio: steady rate / push tuned's in the same round)"
    )
    print(
        f"  {'consumer':<22} {'msgs/s whole':>13} {'msgs/s steady':>14} {'ratio':>7}"
        f" {'client µs/msg':>14} {'server µs/msg':>14}"
    )
    status = 0
    for index, name in enumerate(run.name for run in rounds[0]):
        runs = [runs[index] for runs in rounds]
        skipped = next((run.skipped for run in runs if run.skipped), "")
        if skipped:
            print(f"  {name:<22} skipped: {skipped}")
            continue
        tuned_rates = [
            next(r for r in runs_of_round if r.name == _NAMES[3]).steady_rate for runs_of_round in rounds
        ]
        ratios = [
            run.steady_rate / tuned if tuned else 0.0 for run, tuned in zip(runs, tuned_rates, strict=True)
        ]
        ratio = statistics.median(ratios)
        mark = "  " if name == _NAMES[3] else (" ✓" if ratio >= TARGET_RATIO else " ✗")
        client = statistics.median(run.client_cpu_s * 1e6 / max(run.count, 1) for run in runs)
        servers = [run.server_cpu_s * 1e6 / max(run.count, 1) for run in runs if run.server_cpu_s is not None]
        server = f"{statistics.median(servers):>14.1f}" if servers else f"{'n/a':>14}"
        print(
            f"  {name:<22} {statistics.median(run.total_rate for run in runs):>13,.0f} "
            f"{statistics.median(run.steady_rate for run in runs):>14,.0f} "
            f"{ratio:>6.2f}x{mark} {client:>12.1f} {server}"
        )
        for run in runs:
            if run.count < goal:
                print(f"    {name} read {run.count:,} of {goal:,} messages", file=sys.stderr)
                status = 1
    return status
