"""``bench consume --compare-defaults``'s Java line: Apache RocketMQ's DefaultMQPushConsumer at
its defaults, in a JVM of its own.

The client (``rocketmq-client`` 5.5.0) comes from the ``rocketmq`` profile of ``bench peers``'
pinned pom, resolved by Maven into ``.cache/m2`` on first use (``orbitmq.bench.peers._maven``).
The driver, ``JavaPushConsume.java`` beside this module, is compiled with ``javac`` once per
content of the source and the classpath into ``.cache/bench-java/<digest>/`` (under a file lock:
two benchmarks may start at once). Without java, javac or mvn the line is skipped with one
sentence saying what is missing.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from orbitmq.bench._client_drivers import DriverResult, built_once
from orbitmq.bench.peers._jvm import TOOL_HEAP
from orbitmq.bench.peers._maven import JavaMissing, cache_dir, classpath

__all__ = ["java_push_consume"]

COMPILE_TIMEOUT_S = 180
_SOURCE = Path(__file__).with_name("JavaPushConsume.java")
_MAIN = "JavaPushConsume"


def _missing_tools() -> str | None:
    missing = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
    return ", ".join(missing) or None


def _compiled(client_classpath: str) -> Path:
    """The directory of the compiled driver (built on first use)."""
    digest = hashlib.sha256(_SOURCE.read_bytes() + client_classpath.encode()).hexdigest()[:16]

    def compile_into(classes: Path) -> None:
        command = ["javac", "-nowarn", "-d", str(classes), "-cp", client_classpath, str(_SOURCE)]
        built = subprocess.run(command, capture_output=True, timeout=COMPILE_TIMEOUT_S)
        if built.returncode != 0:
            error = built.stderr.decode(errors="replace").strip().splitlines()[:1] or ["no output"]
            raise JavaMissing(f"the Java driver did not compile: {error[0][:200]}")

    return built_once(cache_dir() / "bench-java", digest, compile_into)


def java_push_consume(namesrv: str, topic: str, group: str, count: int, timeout_s: float) -> DriverResult:
    """Run the Java push consumer until it read ``count`` messages of ``topic`` (or ``timeout_s``)."""
    missing = _missing_tools()
    if missing is not None:
        return DriverResult(skipped=f"no {missing} on PATH (the Java client needs a JDK and Maven)")
    try:
        client_classpath = classpath("rocketmq")
        classes = _compiled(client_classpath)
    except (JavaMissing, OSError, subprocess.SubprocessError) as exc:
        return DriverResult(skipped=str(exc))
    with tempfile.TemporaryDirectory(prefix="orbitmq-bench-java-") as home:
        # user.home: the client writes its logs under it.
        command = [
            "java", *TOOL_HEAP, "-Djava.net.preferIPv4Stack=true", f"-Duser.home={home}",
            "-cp", f"{classes}:{client_classpath}", _MAIN, namesrv, topic, group, str(count), str(timeout_s),
        ]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, timeout=timeout_s + 120)
        except subprocess.TimeoutExpired:
            return DriverResult(skipped=f"the Java consumer did not exit within {timeout_s + 120:g} s")
    lines = [line for line in done.stdout.decode(errors="replace").splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        output = (done.stdout + done.stderr).decode(errors="replace").splitlines()
        # The exception's first line says what failed; the stack under it does not.
        errors = [line for line in output if "Exception" in line and not line.lstrip().startswith("at ")]
        why = (errors or [line for line in output if line.strip()] or ["no output"])[0].strip()
        return DriverResult(skipped=f"the Java consumer failed (exit {done.returncode}): {why[:200]}")
    return DriverResult.from_json_line(lines[-1])
