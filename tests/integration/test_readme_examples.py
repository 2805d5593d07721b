"""The README's client examples run, unchanged but for the server address.

Method: every Python block preceded by an ``<!-- example: NAME -->`` marker is extracted, its
``127.0.0.1:9876`` replaced by the address of a fresh `orbitmq standalone`, and run as a script
in a child process (HOME in a temporary directory, for the C++ client's logs). Blocks marked
``<!-- example-sdk5: NAME -->`` use the RocketMQ 5.x SDK: their ``127.0.0.1:8081`` becomes the
standalone's gRPC port and they run with the SDK's own venv. The examples assert on what they
receive, so a script that exits 0 worked.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess
from tests.support.sdk5 import sdk_python

README = Path(__file__).resolve().parents[2] / "README.md"
_EXAMPLE = re.compile(r"<!-- example: (?P<name>[\w-]+) -->\s*```python\n(?P<code>.*?)```", re.DOTALL)
_SDK5_EXAMPLE = re.compile(
    r"<!-- example-sdk5: (?P<name>[\w-]+) -->\s*```python\n(?P<code>.*?)```", re.DOTALL
)


def readme_examples(pattern: re.Pattern[str] = _EXAMPLE) -> dict[str, str]:
    return {match["name"]: match["code"] for match in pattern.finditer(README.read_text())}


def test_readme_has_runnable_examples() -> None:
    assert {"cpp-client", "asyncio-client", "blocking-client", "delay-and-transactions"} <= set(
        readme_examples()
    )
    assert "simple-consumer" in readme_examples(_SDK5_EXAMPLE)


@pytest.mark.parametrize("name", sorted(readme_examples()))
def test_readme_example_runs(name: str, standalone: ServerProcess, tmp_path: Path) -> None:
    code = readme_examples()[name]
    assert "127.0.0.1:9876" in code, f"example {name} does not name the default nameserver"
    script = tmp_path / f"{name}.py"
    script.write_text(code.replace("127.0.0.1:9876", standalone.addr))
    env = dict(os.environ, HOME=str(tmp_path))
    done = subprocess.run(
        [sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, timeout=180
    )
    assert done.returncode == 0, f"example {name} failed:\n{done.stdout.decode()}\n{done.stderr.decode()}"


@pytest.mark.parametrize("name", sorted(readme_examples(_SDK5_EXAMPLE)))
def test_readme_sdk5_example_runs(name: str, standalone: ServerProcess, tmp_path: Path) -> None:
    code = readme_examples(_SDK5_EXAMPLE)[name]
    assert "127.0.0.1:8081" in code, f"example {name} does not name the default gRPC port"
    script = tmp_path / f"{name}.py"
    script.write_text(code.replace("127.0.0.1:8081", f"127.0.0.1:{standalone.extra_ports[1]}"))
    env = dict(os.environ, HOME=str(tmp_path))
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(sdk_python()), str(script)], env=env, cwd=tmp_path, capture_output=True, timeout=180
    )
    assert done.returncode == 0, f"example {name} failed:\n{done.stdout.decode()}\n{done.stderr.decode()}"
