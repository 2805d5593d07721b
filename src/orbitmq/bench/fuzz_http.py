"""``python -m orbitmq.bench fuzz-http --requests 20000``: hostile HTTP requests against a real dashboard.

Starts ``orbitmq standalone`` and ``orbitmq dashboard`` (processes, 127.0.0.1, free ports, a
temporary directory), stores seed messages in a topic of their own (``HttpFuzzSeed``), takes one page's CSRF
cookie and token, then sends ``--requests`` raw HTTP/1.1 requests drawn from a seeded generator
(:func:`cases`) over every route: malformed paths and names (traversal, percent garbage, NUL,
unicode, 300-character names), query parameters (bad times, huge and negative numbers, long
strings), form bodies (urlencoded, multipart, JSON, binary, past the 1 MiB form limit), bad
methods, odd headers (Content-Type, Content-Length, cookies, Origin, Sec-Fetch-Site, basic
credentials, a 16 KiB header) and broken request lines. A share of the state-changing ones
carry the valid token, so they reach the handlers (names they change all start with
``FuzzHttp``: the seed topic and the system topics are never theirs to delete). Meanwhile a
prober asks ``/api/history`` every second.

Checks (the remoting fuzzer's, ``orbitmq.bench.fuzz``): no 500 answer and no traceback in the
dashboard's log; the prober is always answered; the seed messages read back byte for byte;
the log grows by at most a few bytes per request. Prints requests/s, answers by status, the
prober's slowest answer, log growth and the dashboard's memory and open files before and
after; exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlencode

__all__ = ["HttpCase", "HttpFuzzStats", "cases", "fetch_token", "fuzz", "run"]

START_TIMEOUT_S = 60.0
SEED_TOPIC = "HttpFuzzSeed"
SEED_MESSAGES = 64
ANSWER_TIMEOUT_S = 30.0
PROBE_TIMEOUT_S = 10.0
LOG_BYTES_PER_REQUEST_MAX = 20
OVERSIZED_BYTES = (1 << 20) + 4096

_NAMES = [
    "TBW102", SEED_TOPIC, "FuzzHttpTopic", "%DLQ%FuzzHttpGroup", "%RETRY%FuzzHttpGroup", "CG_FUZZ",
    "..", "../../etc/passwd", "%00", "%ZZ", "%", "a" * 300, "ü名字", "<script>alert(1)</script>", " ",
    "%2F%2F", "TBW102%2F..", "FuzzHttp\r\nX-Injected: 1", "-1", "0" * 40, "FuzzHttp" + "x" * 200,
]  # fmt: skip
_VALUES = [
    "", "garbage", "-1", "0", "1", "99999999999999999999999", "1e309", "NaN", "2026-13-45", "2026-01-01T00:00",
    "9999-12-31T23:59:59", "0001-01-01T00:00", "\x00", "x" * 5000, "ü", "%DLQ%CG_FUZZ", "time", "key", "id",
    "json", "csv", "xml", "on", "off", "all", "picked", "direct", "original", "-99999999999",
    "1700000000000", "18446744073709551616", "' OR 1=1 --", "{{7*7}}",
]  # fmt: skip
_PARAMS = [
    "mode",
    "topic",
    "key",
    "id",
    "begin",
    "end",
    "page",
    "size",
    "format",
    "q",
    "kind",
    "notice",
    "problem",
]
_FIELDS = [
    "topic", "queues", "perm", "order", "confirm", "body", "tags", "keys", "time", "skip", "msg_id", "which",
    "to", "begin", "end", "csrf_token",
]  # fmt: skip
_METHODS = ["GET", "GET", "GET", "POST", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO"]
_CONTENT_TYPES = [
    "application/x-www-form-urlencoded", "multipart/form-data; boundary=XyZ", "multipart/form-data",
    "application/json", "text/plain", "application/octet-stream", "", "application/x-www-form-urlencoded; charset=latin-9",
]  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=20_000, help="requests to send (default 20000)")
    parser.add_argument("--seed", type=int, default=20261128, help="generator seed (the run replays from it)")
    parser.add_argument("--connections", type=int, default=4, help="requests in flight at once")
    parser.add_argument("--keep", action="store_true", help="keep the working directory (logs, store)")


@dataclass(frozen=True, slots=True)
class HttpCase:
    """One raw request; ``kind`` names what it exercises (for the summary)."""

    kind: str
    data: bytes


@dataclass(slots=True)
class HttpFuzzStats:
    requests: int = 0
    seconds: float = 0.0
    by_status: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    probes: int = 0
    probe_failures: list[str] = field(default_factory=list)
    probe_max_ms: float = 0.0

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def _path(rng: random.Random, names: list[str]) -> str:
    name = quote(rng.choice(names), safe="%") if rng.random() < 0.8 else rng.choice(names)
    other = quote(rng.choice(names), safe="")
    return rng.choice(
        [
            "/", "/api/history", "/topics", f"/topics/{name}", f"/topics/{name}/delete", f"/topics/{name}/send",
            "/groups", f"/groups/{name}", f"/groups/{name}/reset", "/messages", f"/messages/{name}/{other}",
            "/dlq", "/dlq/resend", f"/dlq/{name}", f"/dlq/{name}/export", f"/dlq/{name}/resend",
            "/static/app.js", "/static/style.css", f"/static/{name}", "/static/../app.py", "//topics",
            "/topics/", "/no/such/page", "/" + "a/" * 200, "*",
        ]
    )  # fmt: skip


def _query(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return ""
    params = [(rng.choice(_PARAMS), rng.choice(_VALUES)) for _ in range(rng.randint(1, 6))]
    text = urlencode(params)
    if rng.random() < 0.1:
        text += rng.choice(["&%zz=1", "&&&", "=x", "&page", "&" + "p=1&" * 300])
    return "?" + text


def _form(rng: random.Random, token: str | None) -> dict[str, str]:
    form = {rng.choice(_FIELDS): rng.choice(_VALUES) for _ in range(rng.randint(0, 8))}
    if token is not None:
        form["csrf_token"] = token
        for key in ("topic", "msg_id"):
            if key in form:
                form[key] = "FuzzHttp" + re.sub(r"[^A-Za-z0-9_-]", "", form[key])[:40]
    return form


def _body(rng: random.Random, content_type: str, token: str | None) -> bytes:
    roll = rng.random()
    if roll < 0.01:
        return b"b" * OVERSIZED_BYTES
    if roll < 0.1:
        return rng.randbytes(rng.randint(0, 2048))
    form = _form(rng, token)
    if content_type.startswith("multipart"):
        parts = [
            f'--XyZ\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'
            for key, value in form.items()
        ]
        tail = "--XyZ--\r\n" if rng.random() < 0.8 else "--XyZ"
        return ("".join(parts) + tail).encode("utf-8", "replace")
    if content_type == "application/json":
        import json

        return json.dumps(form).encode()
    return urlencode(form).encode()


def _raw_garbage(rng: random.Random) -> bytes:
    return rng.choice(
        [
            b"GARBAGE\r\n\r\n",
            b"GET /\r\n\r\n",
            b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
            b"GET /topics HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
            b"POST /topics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nxx\r\n0\r\n\r\n",
            b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
            b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + rng.randbytes(64),
            b"GET / HTTP/1.1\r\n" + b"X-Many: y\r\n" * 200 + b"Host: x\r\n\r\n",
            rng.randbytes(rng.randint(1, 512)) + b"\r\n\r\n",
        ]
    )


def cases(count: int, seed: int, port: int, cookie: str, token: str) -> Iterator[HttpCase]:
    """``count`` requests from ``seed`` (the same seed gives the same requests)."""
    rng = random.Random(seed)
    for _ in range(count):
        if rng.random() < 0.05:
            yield HttpCase("malformed request line", _raw_garbage(rng))
            continue
        method = rng.choice(_METHODS)
        valid = method == "POST" and rng.random() < 0.3
        # What a request with the valid token may change is named FuzzHttp*: never the seed topic.
        names = [f"FuzzHttp{index}" for index in range(8)] if valid else _NAMES
        target = _path(rng, names) + _query(rng)
        headers = {"Host": rng.choice([f"127.0.0.1:{port}"] * 8 + ["evil.example", "", "x" * 300])}
        body = b""
        if method in ("POST", "PUT", "PATCH") or rng.random() < 0.05:
            content_type = "application/x-www-form-urlencoded" if valid else rng.choice(_CONTENT_TYPES)
            body = _body(rng, content_type, token if valid else None)
            if content_type:
                headers["Content-Type"] = content_type
        if valid or rng.random() < 0.2:
            headers["Cookie"] = (
                cookie if valid else rng.choice([cookie, "orbitmq_csrf=" + "A" * 40, "=;;==", "x" * 5000])
            )
        if rng.random() < 0.3:
            headers["Origin"] = rng.choice(["http://evil.example", "null", f"http://127.0.0.1:{port}", "x"])
        if rng.random() < 0.2:
            headers["Sec-Fetch-Site"] = rng.choice(["cross-site", "same-site", "same-origin", "none", "\x7f"])
        if rng.random() < 0.1:
            headers["Authorization"] = rng.choice(["Basic Zm9vOmJhcg==", "Basic !!!", "Bearer x", "Basic"])
        if rng.random() < 0.05:
            headers["X-Big"] = "h" * 16384
        if rng.random() < 0.1:
            headers["X-Csrf-Token"] = token if valid else rng.choice(["0" * 64, "", "\u00e9" * 64])
        length = len(body)
        if rng.random() < 0.03:
            length = max(0, length - rng.randint(1, 10))  # shorter than the body: the rest is garbage
        head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head += f"Content-Length: {length}\r\nConnection: close\r\n\r\n"
        kind = f"{method} {'with token' if valid else ''}".strip()
        yield HttpCase(kind, head.encode("utf-8", "replace") + body)


async def _send(host: str, port: int, data: bytes, timeout_s: float) -> str:
    """Send one request on its own connection; the answer's status code, or what happened instead."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (OSError, TimeoutError) as exc:
        return f"connect failed: {type(exc).__name__}"
    try:
        try:
            writer.write(data)
            await writer.drain()
        except (ConnectionError, OSError):
            pass  # the server may answer (413, 400) and close before taking the whole body
        try:
            line = await asyncio.wait_for(reader.readline(), timeout_s)
        except TimeoutError:
            return "no answer"
        except (ConnectionError, OSError):
            return "closed"
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(b"HTTP/"):
            try:
                await asyncio.wait_for(reader.read(), timeout_s)  # drain to the close
            except (TimeoutError, ConnectionError, OSError):
                pass
            return parts[1].decode("latin-1")
        return "closed" if not line else "not HTTP"
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def fetch_token(host: str, port: int) -> tuple[str, str]:
    """(cookie header value, form token) of a fresh page, as a browser would get them."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(f"GET /topics HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        answer = (await asyncio.wait_for(reader.read(), 30)).decode("utf-8", "replace")
    finally:
        writer.close()
    cookie = re.search(r"set-cookie: (orbitmq_csrf=[^;]+)", answer, re.IGNORECASE)
    token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', answer)
    if cookie is None or token is None:
        raise RuntimeError("the dashboard's /topics page carries no CSRF cookie or token")
    return cookie.group(1), token.group(1)


async def _probe(host: str, port: int, stats: HttpFuzzStats, done: asyncio.Event) -> None:
    request = f"GET /api/history HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()
    while not done.is_set():
        started = time.monotonic()
        status = await _send(host, port, request, PROBE_TIMEOUT_S)
        took_ms = (time.monotonic() - started) * 1000
        stats.probes += 1
        stats.probe_max_ms = max(stats.probe_max_ms, took_ms)
        if status != "200":
            stats.probe_failures.append(f"/api/history answered {status} after {took_ms:.0f} ms")
        try:
            await asyncio.wait_for(done.wait(), 1.0)
        except TimeoutError:
            pass


async def fuzz(host: str, port: int, requests: list[HttpCase], connections: int = 4) -> HttpFuzzStats:
    """Send every request (``connections`` at a time) while a prober asks /api/history each second."""
    stats = HttpFuzzStats()
    done = asyncio.Event()
    prober = asyncio.create_task(_probe(host, port, stats, done))
    queue = iter(requests)
    started = time.monotonic()

    async def worker() -> None:
        for case in queue:
            status = await _send(host, port, case.data, ANSWER_TIMEOUT_S)
            stats.requests += 1
            stats.by_status[status] += 1
            stats.by_kind[case.kind] += 1
            if status.startswith("5") and status != "502" or status in ("no answer", "connect failed"):
                first_line = case.data.split(b"\r\n", 1)[0][:200]
                stats.server_errors.append(f"{status}: {first_line!r}")

    await asyncio.gather(*(worker() for _ in range(connections)))
    stats.seconds = time.monotonic() - started
    done.set()
    await prober
    return stats


def check(stats: HttpFuzzStats, log_growth: int, exceptions: Counter[str]) -> list[str]:
    """What failed: 5xx or unanswered requests, prober failures, tracebacks, log growth."""
    problems = []
    if stats.server_errors:
        problems.append(
            f"{len(stats.server_errors)} requests got a server error or no answer: {stats.server_errors[:5]}"
        )
    if stats.probe_failures:
        problems.append(f"prober failed {len(stats.probe_failures)} times: {stats.probe_failures[:3]}")
    if exceptions:
        problems.append(f"the dashboard logged exceptions: {dict(exceptions)}")
    if log_growth > LOG_BYTES_PER_REQUEST_MAX * max(stats.requests, 1):
        problems.append(f"log grew {log_growth} bytes for {stats.requests} requests")
    return problems


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited {proc.returncode}; see {log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port} after {START_TIMEOUT_S:g} s; see {log}")


def run(args: argparse.Namespace) -> int:
    from orbitmq.bench import _fuzz_run

    workdir = Path(tempfile.mkdtemp(prefix="orbitmq-fuzz-http-"))
    namesrv_port, broker_port, http_port = _free_port(), _free_port(), _free_port()
    python = sys.executable
    procs: list[subprocess.Popen[bytes]] = []
    failures: list[str] = []
    standalone_log, dashboard_log = workdir / "standalone.log", workdir / "dashboard.log"
    try:
        with open(standalone_log, "ab") as log:
            procs.append(
                subprocess.Popen(
                    [
                        python,
                        "-m",
                        "orbitmq.cli",
                        "standalone",
                        "--data-dir",
                        str(workdir / "data"),
                        "--namesrv-port",
                        str(namesrv_port),
                        "--broker-port",
                        str(broker_port),
                        "--no-proxy",
                        "--metrics-port",
                        "0",
                        "--namesrv-metrics-port",
                        "0",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
            )
        _wait_listening(procs[0], broker_port, standalone_log)
        broker_addr = f"127.0.0.1:{broker_port}"
        rng = random.Random(args.seed)
        seeds = [rng.randbytes(rng.randint(1, 2048)) for _ in range(SEED_MESSAGES)]
        asyncio.run(_fuzz_run.seed_messages(broker_addr, SEED_TOPIC, seeds))
        with open(dashboard_log, "ab") as log:
            procs.append(
                subprocess.Popen(
                    [
                        python,
                        "-m",
                        "orbitmq.dashboard",
                        "--namesrv",
                        f"127.0.0.1:{namesrv_port}",
                        "--port",
                        str(http_port),
                        "--sample-interval-s",
                        "1",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )  # fmt: skip
            )
        _wait_listening(procs[1], http_port, dashboard_log)
        cookie, token = asyncio.run(fetch_token("127.0.0.1", http_port))
        requests = list(cases(args.requests, args.seed, http_port, cookie, token))
        before = _fuzz_run.process_stats(procs[1].pid)
        log_before = dashboard_log.stat().st_size
        stats = asyncio.run(fuzz("127.0.0.1", http_port, requests, args.connections))
        after = _fuzz_run.process_stats(procs[1].pid)
        log_growth = dashboard_log.stat().st_size - log_before
        exceptions = _fuzz_run.server_exceptions(dashboard_log.read_text(errors="replace"))
        print(
            f"requests: {stats.requests} in {stats.seconds:.1f} s = {stats.requests_per_s:,.0f}/s "
            f"(seed {args.seed})"
        )
        print(f"answers: {', '.join(f'{status} {n}' for status, n in stats.by_status.most_common())}")
        print(f"kinds: {', '.join(f'{kind} {n}' for kind, n in stats.by_kind.most_common())}")
        print(
            f"prober: {stats.probes} probes, {len(stats.probe_failures)} failed, slowest {stats.probe_max_ms:.0f} ms"
        )
        print(
            f"dashboard: RSS {before[0] / 2**20:.0f} -> {after[0] / 2**20:.0f} MiB, open files {before[1]} -> {after[1]}"
        )
        print(f"log growth: {log_growth} bytes ({log_growth / max(stats.requests, 1):.2f} bytes per request)")
        print(f"server-side exceptions: {len(exceptions)} distinct {dict(exceptions) or ''}")
        failures += check(stats, log_growth, exceptions)
        read = asyncio.run(_fuzz_run.read_back(broker_addr, SEED_TOPIC))
        if read == seeds:
            print(f"seed messages after the run: {len(read)} of {len(seeds)}, byte for byte")
        else:
            failures.append(
                f"seed messages after the run: read {len(read)}, expected {len(seeds)} (or they differ)"
            )
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
        if args.keep or failures:
            print(f"working directory kept: {workdir}")
        else:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    for failure in failures:
        print(f"FAILED: {failure}")
    print("fuzz-http: " + ("clean" if not failures else f"{len(failures)} check(s) failed"))
    return 1 if failures else 0
