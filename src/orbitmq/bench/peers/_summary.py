"""What ``bench peers`` prints at the end: its three tables and a verdict on each target.

Targets (ratios OrbitMQ / peer from this one run): at least 1.0x Apache RocketMQ's throughput
in every workload with the same client, p99 at the fixed rate no higher than RocketMQ's, at
least 1.0x Kafka's produce rate at 1 KiB with ASYNC_FLUSH; reported too: 1 KiB produce against
2x Redis, and (with ``--flush sync``) the sync-send p99 against Redis' ``appendfsync always``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from orbitmq.bench._report import verdict
from orbitmq.bench.peers._tables import Table, ratio
from orbitmq.bench.peers._tools import ToolResult

__all__ = ["APACHE", "KAFKA", "ORBIT", "REDIS", "Results", "report"]

ORBIT, APACHE, KAFKA, REDIS = "OrbitMQ", "RocketMQ 5.5.0", "Kafka", "Redis"


class Results:
    """Figures by (workload key, system); the tools' results by (key, system)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], float | None] = {}
        self.notes: dict[str, str] = {}
        self.tools: dict[tuple[str, str], ToolResult] = {}

    def put(self, key: str, system: str, value: float | None) -> None:
        self.values[(key, system)] = value

    def get(self, key: str, system: str) -> float | None:
        return self.values.get((key, system))

    def row(self, key: str, systems: Sequence[str]) -> dict[str, float | None]:
        return {system: self.get(key, system) for system in systems}

    def tool_row(self, key: str, systems: Sequence[str], field: str) -> dict[str, float | None]:
        values: dict[str, float | None] = {}
        for system in systems:
            found = self.tools.get((key, system))
            values[system] = getattr(found, field) if found else None
        return values


def _senders(args: argparse.Namespace) -> list[int]:
    return [int(value) for value in args.senders.split(",") if value.strip()]


def _client_table(args: argparse.Namespace, present: Sequence[str], results: Results) -> Table:
    systems = [name for name in (ORBIT, APACHE, REDIS) if name in present]
    redis_how = "appendfsync always" if args.flush == "sync" else "AOF everysec"
    table = Table(
        f"1. Same client: OrbitMQ's Python client on OrbitMQ's broker and on Apache RocketMQ 5.5.0's; "
        f"redis-py on Redis ({redis_how}). Flush {args.flush.upper()}_FLUSH. ratio = OrbitMQ / peer",
        systems,
        systems[1:],
    )
    table.add("produce 1 KiB, batches", "msgs/s", results.row("batch-1k", systems), f"{args.count_1k:,} msgs")
    table.add("produce 100 B, batches", "msgs/s", results.row("batch-100", systems), f"{args.backlog:,} msgs")
    for senders in _senders(args):
        table.add(f"sync sends 1 KiB, {senders} senders", "msgs/s", results.row(f"sync-{senders}", systems))
    for senders in _senders(args):
        for tag in ("p50", "p99"):
            table.add(
                f"  sync send {tag}, {senders} senders",
                "ms",
                results.row(f"sync-{senders}-rt-{tag}", systems),
            )
    for tag in ("p50", "p99", "p99.9"):
        table.add(f"end to end {tag} at {args.rate:,}/s", "ms", results.row(f"e2e-{tag}", systems))
    table.add(
        f"catch-up on {args.backlog:,} x 100 B",
        "msgs/s",
        results.row("catch-up", systems),
        "start-up included",
    )
    table.add("  steady, after the first message", "msgs/s", results.row("catch-up-steady", systems))
    table.add("server CPU over this group", "CPU s", results.row("client-cpu", systems), "lower is better")
    table.add("server peak RSS", "MiB", results.row("client-rss", systems), "lower is better")
    return table


def _tools_table(args: argparse.Namespace, present: Sequence[str], results: Results) -> Table:
    systems = [name for name in (ORBIT, APACHE) if name in present]
    table = Table(
        f"2. RocketMQ's own tools, unchanged (rocketmq-example 5.5.0 benchmark.Producer / Consumer, Java "
        f"client 5.5.0), {args.queues} queues, OrbitMQ's broker and Apache's. Flush {args.flush.upper()}_FLUSH",
        systems,
        systems[1:],
    )
    for size in (1024, 100):
        for threads in _senders(args):
            key = f"rmq-{size}-{threads}"
            label = f"Producer {size} B, {threads} threads"
            notes = [
                f"{system}: {found.note}"
                for system in systems
                if (found := results.tools.get((key, system))) and found.rate is None
            ]
            # A send that fails (its 3 s timeout, often a cold JVM's first route lookup and
            # connect on a loaded host) makes that thread sleep 3 s more: the rate then says
            # little about the broker.
            notes += [
                f"{system}: {found.failed:,} sends failed"
                for system in systems
                if (found := results.tools.get((key, system))) and found.failed
            ]
            table.add(label, "msgs/s", results.tool_row(key, systems, "rate"), "; ".join(notes))
            table.add("  average RT", "ms", results.tool_row(key, systems, "avg_ms"))
            table.add("  max RT", "ms", results.tool_row(key, systems, "max_ms"))
    table.add(
        "Producer 100 B, 16 threads, beside a Consumer",
        "msgs/s",
        results.tool_row("rmq-pc-producer", systems, "rate"),
    )
    notes = [
        f"{system}: {found.note}"
        for system in systems
        if (found := results.tools.get(("rmq-consumer", system))) and found.rate is None
    ]
    table.add(
        "  Consumer, 20 threads, its defaults",
        "msgs/s",
        results.tool_row("rmq-consumer", systems, "rate"),
        "; ".join(notes),
    )
    table.add("  average born-to-consume", "ms", results.tool_row("rmq-consumer", systems, "avg_ms"))
    table.add("  max born-to-consume", "ms", results.tool_row("rmq-consumer", systems, "max_ms"))
    table.add("server CPU over this group", "CPU s", results.row("tools-cpu", systems), "lower is better")
    table.add("server peak RSS", "MiB", results.row("tools-rss", systems), "lower is better")
    return table


def _orbit_best(results: Results, size: int) -> float | None:
    """OrbitMQ's best produce rate at ``size``: Python batches or the RocketMQ Producer's."""
    key = "batch-1k" if size == 1024 else "batch-100"
    candidates = [results.get(key, ORBIT)]
    candidates += [
        found.rate
        for (name, system), found in results.tools.items()
        if system == ORBIT and name.startswith(f"rmq-{size}-")
    ]
    rates = [rate for rate in candidates if rate is not None]
    return max(rates) if rates else None


def _kafka_table(args: argparse.Namespace, results: Results) -> Table:
    systems = [ORBIT, KAFKA]
    flush_note = "" if args.flush == "async" else " (OrbitMQ here runs SYNC_FLUSH: not like for like)"
    table = Table(
        "3. Kafka's own tools (ProducerPerformance: one producer, its default batching; ConsumerPerformance) "
        f"on Kafka in KRaft mode, one node, {args.queues} partitions; Kafka's durability is the page cache, so "
        f"it is compared with OrbitMQ's ASYNC_FLUSH{flush_note}; OrbitMQ: its best produce figure above",
        systems,
        [KAFKA],
    )
    for size in (1024, 100):
        found = results.tools.get((f"kafka-{size}", KAFKA))
        note = found.note if found and found.rate is None else ""
        table.add(
            f"produce {size} B, max throughput",
            "msgs/s",
            {ORBIT: _orbit_best(results, size), KAFKA: found.rate if found else None},
            note,
        )
    table.add(
        "  Kafka send-to-ack p99", "ms", {KAFKA: results.tool_row("kafka-1024", [KAFKA], "p99_ms")[KAFKA]}
    )
    found = results.tools.get(("kafka-consumer", KAFKA))
    table.add(
        "consume a 100 B backlog", "msgs/s", {ORBIT: results.get("catch-up-steady", ORBIT), KAFKA: found.rate if found else None},
        "OrbitMQ: PushConsumer steady rate; Kafka: ConsumerPerformance fetch rate",
    )  # fmt: skip
    table.add("server CPU over this group", "CPU s", {KAFKA: results.get("tools-cpu", KAFKA)})
    table.add("server peak RSS", "MiB", {KAFKA: results.get("tools-rss", KAFKA)})
    return table


def _verdicts(args: argparse.Namespace, present: Sequence[str], results: Results) -> list[str]:
    lines = ["\nTargets (ratios from this run):"]
    if APACHE in present:
        rates = [("batch-1k", "produce 1 KiB batches"), ("batch-100", "produce 100 B batches")]
        rates += [(f"sync-{n}", f"sync sends, {n} senders") for n in _senders(args)]
        rates += [("catch-up", "catch-up")]
        ratios = [(label, ratio(results.get(key, ORBIT), results.get(key, APACHE))) for key, label in rates]
        ratios += [
            (
                f"RocketMQ Producer {size} B {threads} thr",
                ratio(*results.tool_row(f"rmq-{size}-{threads}", [ORBIT, APACHE], "rate").values()),
            )
            for size in (1024, 100)
            for threads in _senders(args)
        ]
        ratios += [
            (f"RocketMQ {name}", ratio(*results.tool_row(key, [ORBIT, APACHE], "rate").values()))
            for key, name in (("rmq-pc-producer", "Producer beside Consumer"), ("rmq-consumer", "Consumer"))
        ]
        known = [(label, value) for label, value in ratios if value is not None]
        lost = [f"{label} {value:.2f}x" for label, value in known if value < 1.0]
        met = bool(known) and not lost
        lines.append(
            f"  >= 1.0x RocketMQ in every workload, same client: {verdict(met)}"
            + (f" (below: {', '.join(lost)})" if lost else f" ({len(known)} workloads)")
        )
        p99 = ratio(results.get("e2e-p99", ORBIT), results.get("e2e-p99", APACHE))
        lines.append(
            f"  end-to-end p99 at {args.rate:,}/s <= RocketMQ's: "
            + ("n/a" if p99 is None else f"{verdict(p99 <= 1.0)} ({p99:.2f}x)")
        )
    else:
        lines.append("  RocketMQ targets: n/a (Apache RocketMQ skipped)")
    if KAFKA in present:
        found = results.tools.get(("kafka-1024", KAFKA))
        value = ratio(_orbit_best(results, 1024), found.rate if found else None)
        flush = "" if args.flush == "async" else " [this run is SYNC_FLUSH: rerun with --flush async]"
        lines.append(
            "  >= 1.0x Kafka produce at 1 KiB, ASYNC_FLUSH: "
            + ("n/a" if value is None else f"{verdict(value >= 1.0)} ({value:.2f}x){flush}")
        )
    else:
        lines.append("  Kafka target: n/a (Apache Kafka skipped)")
    if REDIS in present:
        value = ratio(results.get("batch-1k", ORBIT), results.get("batch-1k", REDIS))
        lines.append(
            "  1 KiB produce >= 2x Redis (earlier target): "
            + ("n/a" if value is None else f"{verdict(value >= 2.0)} ({value:.2f}x)")
        )
        value = ratio(results.get("sync-1-rt-p99", ORBIT), results.get("sync-1-rt-p99", REDIS))
        if args.flush == "sync":
            lines.append(
                "  SYNC_FLUSH sync-send p99 <= Redis appendfsync always (earlier target): "
                + ("n/a" if value is None else f"{verdict(value <= 1.0)} ({value:.2f}x)")
            )
        else:
            lines.append("  SYNC_FLUSH sync-send p99 <= Redis always: run with --flush sync")
    for note in results.notes.values():
        lines.append(f"  incomplete: {note}")
    return lines


def report(args: argparse.Namespace, present: Sequence[str], results: Results) -> None:
    print(_client_table(args, present, results).render())
    if not args.no_tools and ORBIT in present and any(system == ORBIT for _, system in results.tools):
        print(_tools_table(args, present, results).render())
    if KAFKA in present and not args.no_tools:
        print(_kafka_table(args, results).render())
    print("\n".join(_verdicts(args, present, results)), flush=True)
