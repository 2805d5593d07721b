"""The oracle tier: every scenario of the corpus, played against Apache RocketMQ and OrbitMQ.

A difference fails the scenario unless tests/oracle/intended_differences.py lists it.
"""

from __future__ import annotations

import os

import pytest

from orbitmq.transport.connection import RemotingClient
from tests.oracle.conftest import Pair
from tests.oracle.harness import Target, compare, unexplained
from tests.oracle.intended_differences import ALLOWED
from tests.oracle.scenarios import SCENARIOS

# The first test of a fresh machine also resolves the Java servers from Maven Central.
pytestmark = [pytest.mark.oracle, pytest.mark.xdist_group("oracle"), pytest.mark.timeout(600)]


# Against an Apache pair that is already running (ORACLE_APACHE, see conftest.py) each run
# needs topic and group names of its own.
_RUN_TAG = f"_{os.getpid()}" if os.environ.get("ORACLE_APACHE") else ""


async def _play(name: str, pair: Pair, server: str) -> Target:
    client = RemotingClient()
    target = Target(server, pair.broker_addr, pair.namesrv_addr, client, scenario=name + _RUN_TAG)
    try:
        await SCENARIOS[name](target)
    finally:
        await client.close()
    return target


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_oracle_scenario_answers_as_apache(name: str, apache_pair: Pair, orbitmq_pair: Pair) -> None:
    apache = await _play(name, apache_pair, "apache")
    orbitmq = await _play(name, orbitmq_pair, "orbitmq")
    differences = unexplained(compare(name, apache.recorded, orbitmq.recorded), ALLOWED)
    if differences:
        remarks = "\n".join(
            f"  {a.label}: apache remark={a.response.remark!r} / orbitmq remark={b.response.remark!r}"
            for a, b in zip(apache.recorded, orbitmq.recorded, strict=False)
            if a.response.remark or b.response.remark
        )
        listing = "\n".join(f"  {d}" for d in differences)
        pytest.fail(
            f"{len(differences)} unexplained difference(s):\n{listing}\nremarks:\n{remarks}", pytrace=False
        )
