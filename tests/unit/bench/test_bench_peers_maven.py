"""``bench peers``' cached classpaths: one naming jars that are gone is resolved again.

Method: a temporary ``.cache`` holding a classpath file written through a path that no longer
exists (as a cache shared by several checkouts ends up holding); a stand-in ``mvn`` (a shell
script writing the classpath Maven's ``dependency:build-classpath`` would) counts its runs.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path

from orbitmq.bench.peers._maven import classpath


def _fake_mvn(tmp_path: Path, jar: Path) -> Path:
    script = tmp_path / "mvn"
    runs = tmp_path / "runs"
    script.write_text(
        "#!/bin/sh\n"
        f'echo run >> "{runs}"\n'
        'for arg in "$@"; do case "$arg" in -Dmdep.outputFile=*) out="${arg#-Dmdep.outputFile=}";; esac; done\n'
        f'printf "%s" "{jar}" > "$out"\n'
    )
    script.chmod(0o755)
    return script


def test_bench_peers_classpath_resolves_again_when_its_jars_are_gone(tmp_path: Path) -> None:
    jar = tmp_path / "m2" / "client.jar"
    jar.parent.mkdir()
    jar.write_bytes(b"jar")
    cache = tmp_path / "cache"
    pom = Path(str(resources.files("orbitmq.bench.peers").joinpath("pom.xml")))
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    stale = cache / "bench-peers" / f"rocketmq-{digest}.classpath"
    stale.parent.mkdir(parents=True)
    stale.write_text("/gone/checkout/.cache/m2/client.jar")

    resolved = classpath("rocketmq", mvn=str(_fake_mvn(tmp_path, jar)), cache=cache)

    assert resolved == str(jar)
    assert (tmp_path / "runs").read_text().count("run") == 1  # offline resolution sufficed
    assert classpath("rocketmq", mvn=str(_fake_mvn(tmp_path, jar)), cache=cache) == str(jar)
    assert (tmp_path / "runs").read_text().count("run") == 1  # a valid file is used as it is
