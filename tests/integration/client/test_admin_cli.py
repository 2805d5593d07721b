"""``orbitmq admin`` commands against a real standalone: output and exit status."""

from __future__ import annotations

import asyncio

import pytest

from orbitmq.cli.admin import EXIT_NOT_FOUND, main
from orbitmq.model.message import MessageQueue
from tests.integration.client.test_producer import wait_for_brokers
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.integration


def test_admin_cli_topic_lifecycle(standalone: ServerProcess, capsys: pytest.CaptureFixture[str]) -> None:
    from orbitmq.client import AdminClient

    async def ready() -> None:
        async with AdminClient(standalone.addr) as admin:
            await wait_for_brokers(admin)

    asyncio.run(ready())
    namesrv = ["-n", standalone.addr]
    assert main([*namesrv, "cluster", "list"]) == 0
    assert "DefaultCluster  broker-a" in capsys.readouterr().out
    assert main([*namesrv, "topic", "create", "CliTopic", "-q", "3"]) == 0
    assert main([*namesrv, "topic", "status", "CliTopic"]) == 0
    out = capsys.readouterr().out
    assert out.count("broker-a") == 3 and "min_offset" in out

    # A group exists once it committed (or has an online member); progress of one nobody
    # knows is an error (see test_admin_cli_newcomer.py).
    async def commit() -> None:
        async with AdminClient(standalone.addr) as admin:
            await admin.update_consumer_offset("CG_CLI", MessageQueue("CliTopic", "broker-a", 0), 0)

    asyncio.run(commit())
    assert main([*namesrv, "consumer", "progress", "CG_CLI", "-t", "CliTopic"]) == 0
    assert "total lag: 0" in capsys.readouterr().out
    assert main([*namesrv, "consumer", "reset-offset", "CG_CLI", "CliTopic", "-s", "now"]) == 0
    assert "new_offset" in capsys.readouterr().out
    assert main([*namesrv, "topic", "delete", "CliTopic"]) == 0
    assert main([*namesrv, "topic", "route", "CliTopic"]) == EXIT_NOT_FOUND
    assert "no route for topic CliTopic" in capsys.readouterr().err
