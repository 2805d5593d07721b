"""The README's client examples run, unchanged but for the nameserver address.

Method: every Python block preceded by an ``<!-- example: NAME -->`` marker is extracted, its
``127.0.0.1:9876`` replaced by the address of a fresh `orbitmq standalone`, and run as a script
in a child process (HOME in a temporary directory, for the C++ client's logs). The examples
assert on what they receive, so a script that exits 0 worked.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import ServerProcess

README = Path(__file__).resolve().parents[2] / "README.md"
_EXAMPLE = re.compile(r"<!-- example: (?P<name>[\w-]+) -->\s*```python\n(?P<code>.*?)```", re.DOTALL)


def readme_examples() -> dict[str, str]:
    return {match["name"]: match["code"] for match in _EXAMPLE.finditer(README.read_text())}


def test_readme_has_runnable_examples() -> None:
    assert {"cpp-client", "asyncio-client", "blocking-client", "delay-and-transactions"} <= set(
        readme_examples()
    )


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
