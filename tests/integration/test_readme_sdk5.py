"""The README's RocketMQ 5.x SDK example runs, unchanged but for the gRPC address.

Method: the Python block after the README's ``<!-- readme-test: skip (the RocketMQ 5.x SDK ...) -->``
marker (the README test leaves it out: the SDK lives in an environment of its own) is extracted,
its ``127.0.0.1:8081`` replaced by the gRPC port of a fresh `orbitmq standalone`, and run with
the SDK's own venv in a child process (HOME in a temporary directory). The example asserts on
what it receives, so a script that exits 0 worked.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess
from tests.support.sdk5 import sdk_python

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
_SDK5_EXAMPLE = re.compile(
    r"<!-- readme-test: skip \(the RocketMQ 5\.x SDK[^>]*-->\s*```python\n(?P<code>.*?)```", re.DOTALL
)


def test_readme_sdk5_example_runs(standalone: ServerProcess, tmp_path: Path) -> None:
    examples = [match["code"] for match in _SDK5_EXAMPLE.finditer(README.read_text())]
    assert len(examples) == 1, "the README has one RocketMQ 5.x SDK example"
    code = examples[0]
    assert "127.0.0.1:8081" in code, "the example does not name the default gRPC port"
    script = tmp_path / "sdk5_example.py"
    script.write_text(code.replace("127.0.0.1:8081", f"127.0.0.1:{standalone.extra_ports[1]}"))
    env = dict(os.environ, HOME=str(tmp_path))
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(sdk_python()), str(script)], env=env, cwd=tmp_path, capture_output=True, timeout=180
    )
    assert done.returncode == 0, f"the example failed:\n{done.stdout.decode()}\n{done.stderr.decode()}"
