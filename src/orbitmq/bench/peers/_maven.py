"""The peers' Java artifacts: resolved by Maven from the pinned ``pom.xml`` beside this module
into the repository's git-ignored ``.cache/m2``, the tests' oracle tier's cache too.

One classpath per profile of the pom (``rocketmq``: nameserver, broker and ``rocketmq-example``;
``kafka``: ``kafka_2.13`` and ``kafka-tools``), written once per content of the pom to
``.cache/bench-peers/<profile>-<digest>.classpath``. Maven runs offline first (nothing is
fetched when the artifacts are already there), then online, under a file lock: Maven's local
repository is not safe for concurrent writers, and the oracle tier takes the same lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from importlib import resources
from pathlib import Path

__all__ = ["JavaMissing", "cache_dir", "classpath", "java_missing"]

RESOLVE_TIMEOUT_S = 600
OFFLINE_TIMEOUT_S = 120


class JavaMissing(Exception):
    """A peer cannot run here: no java, no mvn, or its artifacts could not be resolved."""


def cache_dir() -> Path:
    """The repository's ``.cache`` (found above this package when it is a checkout), else ./.cache."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").is_file() and (parent / "src" / "orbitmq").is_dir():
            return parent / ".cache"
    return Path.cwd() / ".cache"


def java_missing(java: str, mvn: str) -> str | None:
    """None when both tools run, else which is missing."""
    missing = [name for name in (java, mvn) if shutil.which(name) is None]
    return ", ".join(missing) or None


def _pom() -> Path:
    return Path(str(resources.files("orbitmq.bench.peers").joinpath("pom.xml")))


def _resolve(mvn: str, pom: Path, profile: str, repo: Path, out: Path) -> None:
    base = [
        mvn, "-B", "-q", "-f", str(pom), f"-Dmaven.repo.local={repo}", "-P", profile,
        "dependency:build-classpath", f"-Dmdep.outputFile={out}",
        "-Dmaven.artifact.threads=8", "-Dmaven.wagon.http.retryHandler.count=3",
    ]  # fmt: skip
    done = subprocess.run([*base, "-o"], capture_output=True, timeout=OFFLINE_TIMEOUT_S)
    if done.returncode == 0:
        return
    print(f"fetching the {profile} artifacts from Maven Central into {repo} (first run only)", flush=True)
    try:
        done = subprocess.run(base, capture_output=True, timeout=RESOLVE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise JavaMissing(f"resolving the {profile} artifacts took more than {RESOLVE_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()[-3:]
        raise JavaMissing(f"resolving the {profile} artifacts failed: {' / '.join(tail)}")


def _stale(text: str) -> bool:
    """Whether a written classpath names a jar that is not there (any more)."""
    return any(not Path(entry).exists() for entry in text.strip().split(":") if entry)


def classpath(profile: str, mvn: str = "mvn", cache: Path | None = None) -> str:
    """The classpath of ``profile``'s artifacts, resolving them on first use."""
    cache = cache or cache_dir()
    pom = _pom()
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    builds = cache / "bench-peers"
    classpath_file = builds / f"{profile}-{digest}.classpath"
    if classpath_file.exists() and _stale(classpath_file.read_text()):
        # Written by a checkout whose .cache (a shared one) it named by another path, now gone.
        classpath_file.unlink(missing_ok=True)
    if not classpath_file.exists():
        builds.mkdir(parents=True, exist_ok=True)
        # The oracle tier's lock file: both write into the same .cache/m2.
        (cache / "oracle").mkdir(parents=True, exist_ok=True)
        with open(cache / "oracle" / "resolve.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not classpath_file.exists():
                partial = classpath_file.with_suffix(".partial")
                _resolve(mvn, pom, profile, cache / "m2", partial)
                partial.rename(classpath_file)
    return classpath_file.read_text().strip()
