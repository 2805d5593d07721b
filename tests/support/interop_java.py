"""The real Apache RocketMQ Java clients and tools, resolved from Maven Central, for tests/interop.

``tests/interop/java/pom.xml`` pins each client line in a profile of its own (the 4.9.x and
5.x remoting clients cannot share a classpath). :func:`java_line` resolves a profile's
dependencies into the git-ignored ``.cache/m2`` (``dependency:build-classpath``, offline when
everything is already there) and compiles that line's driver sources
(``tests/interop/java/src/<source_dir>``) with javac, once per content hash of the pom and
the sources, under a file lock: pytest-xdist workers asking at once wait for one build.

A driver prints one JSON line per event; :func:`run_java` runs one with a time limit and
returns its events, raising with the output's tail when it fails.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
JAVA_DIR = REPO_ROOT / "tests" / "interop" / "java"
CACHE = REPO_ROOT / ".cache"
MAVEN_REPO = CACHE / "m2"
BUILDS = CACHE / "interop" / "java"
RESOLVE_TIMEOUT_S = 420
RESOLVE_ATTEMPTS = 2

Event = dict[str, object]

# profile -> the folders of its driver sources under tests/interop/java/src
SOURCE_DIRS = {
    "remoting4": ("common", "remoting"),
    "remoting5": ("common", "remoting"),
    "grpc": ("common", "grpc"),
    "spring": ("common", "spring"),
}


def _sources(profile: str) -> list[Path]:
    return sorted(
        path
        for folder in SOURCE_DIRS[profile]
        for path in (JAVA_DIR / "src" / folder).rglob("*")
        if path.is_file()
    )


@dataclass(frozen=True)
class JavaLine:
    """One client line, resolved and compiled: ``java -cp classpath`` runs its driver."""

    profile: str
    classpath: str


def tools_available() -> str | None:
    """None when java, javac and mvn are on PATH, else what is missing."""
    missing = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
    return ", ".join(missing) or None


def _pom_hash(profile: str) -> str:
    digest = hashlib.sha256((JAVA_DIR / "pom.xml").read_bytes())
    digest.update(profile.encode())
    return digest.hexdigest()[:16]


def _source_hash(profile: str) -> str:
    digest = hashlib.sha256(_pom_hash(profile).encode())
    for path in _sources(profile):
        digest.update(str(path.relative_to(JAVA_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _run(step: list[str], timeout_s: float, cwd: Path = JAVA_DIR) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(step, cwd=cwd, capture_output=True, timeout=timeout_s)


def _failure(what: str, done: subprocess.CompletedProcess[bytes]) -> RuntimeError:
    output = done.stdout.decode(errors="replace")[-3000:] + done.stderr.decode(errors="replace")[-3000:]
    return RuntimeError(f"{what} failed ({done.returncode}):\n{output}")


def _resolve(profile: str, classpath_file: Path) -> None:
    """Write ``profile``'s classpath to ``classpath_file``: offline first, then from Maven Central."""
    base = [
        "mvn",
        "-B",
        "-q",
        f"-Dmaven.repo.local={MAVEN_REPO}",
        f"-P{profile}",
        "dependency:build-classpath",
        f"-Dmdep.outputFile={classpath_file}",
        # A fresh machine fetches a few hundred jars: more threads, and retries on a slow link.
        "-Dmaven.artifact.threads=8",
        "-Dmaven.wagon.http.retryHandler.count=3",
    ]
    offline = _run([*base, "-o"], 120)
    if offline.returncode == 0:
        return
    done = offline
    for _attempt in range(RESOLVE_ATTEMPTS):
        try:
            done = _run(base, RESOLVE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            continue
        if done.returncode == 0:
            return
    raise _failure(f"resolving the {profile} profile of {JAVA_DIR / 'pom.xml'}", done)


def _names_missing_jars(classpath_file: Path) -> bool:
    """Whether a written classpath names a jar that is not there (any more)."""
    if not classpath_file.exists():
        return False
    entries = classpath_file.read_text().strip().split(os.pathsep)
    return any(not Path(entry).exists() for entry in entries if entry)


def java_line(profile: str) -> JavaLine:
    """The ``profile`` line of tests/interop/java/pom.xml, resolved and its driver compiled."""
    build = BUILDS / f"{profile}-{_source_hash(profile)}"
    marker = build / ".complete"
    classes = build / "classes"
    classpath_file = build / "classpath.txt"
    if marker.exists() and _names_missing_jars(classpath_file):
        # Written through another checkout's path to a shared .cache, since removed.
        marker.unlink(missing_ok=True)
    if not marker.exists():
        BUILDS.mkdir(parents=True, exist_ok=True)
        # One lock for every profile: Maven's local repository is not safe for concurrent writers.
        with open(BUILDS / "build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not marker.exists():
                shutil.rmtree(build, ignore_errors=True)
                classes.mkdir(parents=True)
                # The classpath depends on the pom alone: a driver edit does not resolve again.
                resolved = BUILDS / f"classpath-{profile}-{_pom_hash(profile)}.txt"
                if resolved.exists() and _names_missing_jars(resolved):
                    resolved.unlink()
                if not resolved.exists():
                    _resolve(profile, resolved.with_suffix(".tmp"))
                    resolved.with_suffix(".tmp").rename(resolved)
                shutil.copyfile(resolved, classpath_file)
                sources = [str(path) for path in _sources(profile) if path.suffix == ".java"]
                javac = [
                    "javac",
                    "-nowarn",
                    "-encoding",
                    "UTF-8",
                    "-d",
                    str(classes),
                    "-cp",
                    classpath_file.read_text().strip(),
                    *sources,
                ]
                done = _run(javac, 300)
                if done.returncode != 0:
                    raise _failure(f"compiling the {profile} driver", done)
                for folder in SOURCE_DIRS[profile]:
                    resources = JAVA_DIR / "src" / folder / "resources"
                    if resources.is_dir():
                        shutil.copytree(resources, classes, dirs_exist_ok=True)
                marker.write_text(profile + "\n")
    classpath = f"{classes}{os.pathsep}{classpath_file.read_text().strip()}"
    return JavaLine(profile, classpath)


def parse_events(text: str) -> list[Event]:
    """The JSON lines of a driver's output (the clients' own log lines are skipped)."""
    events = []
    for line in text.splitlines():
        if line.startswith("{") and line.endswith("}"):
            events.append(json.loads(line))
    return events


def run_java(
    line: JavaLine,
    main_class: str,
    args: list[str],
    home: Path,
    timeout_s: float = 120.0,
    jvm_options: tuple[str, ...] = (),
    check: bool = True,
) -> list[Event]:
    """Run ``main_class`` of ``line`` with ``args``; its events, or RuntimeError with its output."""
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["HOME"] = str(home)  # the clients keep logs and local offsets under the user's home
    command = [
        "java",
        "-Xms64m",
        "-Xmx384m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        f"-Duser.home={home}",
        f"-Drocketmq.client.logRoot={home / 'logs'}",
        "-Drocketmq.client.logLevel=WARN",
        *jvm_options,
        "-cp",
        line.classpath,
        main_class,
        *args,
    ]
    started = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout_s, env=env, cwd=home)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace")[-4000:]
        raise RuntimeError(f"{main_class} {args[:1]} ran past {timeout_s} s:\n{out}") from exc
    text = done.stdout.decode(errors="replace")
    events = parse_events(text)
    errors = [event for event in events if event.get("event") == "error"]
    if check and (done.returncode != 0 or errors):
        raise RuntimeError(
            f"{main_class} {' '.join(args)[:300]} exited {done.returncode} after "
            f"{time.monotonic() - started:.1f} s: {errors}\n{text[-3000:]}\n{done.stderr.decode(errors='replace')[-3000:]}"
        )
    return events
