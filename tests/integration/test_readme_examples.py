"""The README's RocketMQ 5.x SDK example runs, unchanged but for the gRPC port.

Every other block of the README runs as written in tests/integration/test_readme.py. This one
needs the 5.x SDK, which imports as ``rocketmq`` like the C++ client of the main environment,
so it runs in the SDK's own venv (tests/support/sdk5.py). Method: the Python block preceded by
``<!-- example-sdk5: NAME -->`` is extracted, its ``127.0.0.1:8081`` replaced by the gRPC port
of a fresh `orbitmq standalone`, and run as a script in a child process (HOME in a temporary
directory). The example asserts on what it receives, so a script that exits 0 worked.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess
from tests.support.sdk5 import sdk_python

README = Path(__file__).resolve().parents[2] / "README.md"
_SDK5_EXAMPLE = re.compile(
    r"<!-- example-sdk5: (?P<name>[\w-]+) -->\s*```python\n(?P<code>.*?)```", re.DOTALL
)


def readme_examples(pattern: re.Pattern[str] = _SDK5_EXAMPLE) -> dict[str, str]:
    return {match["name"]: match["code"] for match in pattern.finditer(README.read_text())}


def test_readme_has_runnable_examples() -> None:
    assert "simple-consumer" in readme_examples(_SDK5_EXAMPLE)


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
