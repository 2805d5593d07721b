"""``orbitmq admin`` as a new user meets it: lag where it is largest, names that do not exist,
permissions, topic updates and the command-line conventions mqadmin users expect.

Method: one `orbitmq standalone` per module (free ports, tmp dir, killed in teardown); the CLI
runs in-process (``orbitmq.cli.main.main``) and its output and exit status are checked, with
the admin client reading back what the brokers hold.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from orbitmq.cli.admin import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_USAGE
from orbitmq.cli.main import main
from orbitmq.client import AdminClient, Message, Producer
from orbitmq.errors import ClientError
from orbitmq.model.message import MessageQueue
from tests.integration.client.test_producer import wait_for_brokers
from tests.support.processes import ServerProcess, free_port, start_standalone

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_standalone(tmp_path_factory.mktemp("admin-newcomer"))
    try:

        async def ready() -> None:
            async with AdminClient(proc.addr) as admin:
                await wait_for_brokers(admin)

        asyncio.run(ready())
        yield proc
    finally:
        proc.kill()


def admin(server: ServerProcess, *args: str) -> int:
    return main(["admin", "-n", server.addr, *args])


async def _produce(namesrv: str, topic: str, queues: int, count: int) -> None:
    async with AdminClient(namesrv) as client:
        await client.create_topic(topic, queues)
    async with Producer("PG_NEWCOMER", namesrv) as producer:
        await producer.send_batch([Message(topic, b"m%d" % i) for i in range(count)])


def test_admin_consumer_progress_counts_queues_committed_at_zero_and_never_committed(
    server: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    # Queue 0 holds 60 messages and the group committed 0 there; queue 1 holds 50 the group
    # never committed; queues 2 and 3 are empty. The group is 110 behind.
    async def prepare() -> None:
        async with AdminClient(server.addr) as client:
            await client.create_topic("LagTopic", 4)
            async with Producer("PG_LAG", server.addr) as producer:
                for queue_id, count in ((0, 60), (1, 50)):
                    for _ in range(count):
                        await producer.send_orderly(Message("LagTopic", b"x"), queue_id, _by_queue_id)
            await client.update_consumer_offset("CG_ZERO", MessageQueue("LagTopic", "broker-a", 0), 0)

    asyncio.run(prepare())
    capsys.readouterr()
    assert admin(server, "consumer", "progress", "CG_ZERO") == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("LagTopic")]
    assert [(row[2], row[5], row[6]) for row in rows] == [
        ("0", "0", "60"),
        ("1", "-", "50"),
        ("2", "-", "0"),
        ("3", "-", "0"),
    ], out
    assert "total lag: 110" in out and "never committed" in out


def _by_queue_id(queues: Sequence[MessageQueue], message: Message, queue_id: int) -> MessageQueue:
    return next(mq for mq in queues if mq.queue_id == queue_id)


def test_admin_consumer_progress_and_reset_refuse_a_group_nobody_knows(
    server: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_produce(server.addr, "KnownTopic", 2, 10))
    capsys.readouterr()
    assert admin(server, "consumer", "progress", "NOPE_GROUP") == EXIT_NOT_FOUND
    assert "consumer group NOPE_GROUP does not exist" in capsys.readouterr().err
    assert admin(server, "consumer", "progress", "NOPE_GROUP", "-t", "KnownTopic") == EXIT_NOT_FOUND
    assert "NOPE_GROUP" in capsys.readouterr().err
    assert admin(server, "consumer", "reset-offset", "NO_SUCH_GROUP", "KnownTopic", "-s", "now") == (
        EXIT_NOT_FOUND
    )
    assert "NO_SUCH_GROUP" in capsys.readouterr().err

    async def committed() -> list[int | None]:
        async with AdminClient(server.addr) as client:
            queues = await client.fetch_queues("KnownTopic")
            return [
                await client.committed_offset("NO_SUCH_GROUP", mq, zero_if_not_found=False) for mq in queues
            ]

    # Nothing was written for the mistyped group.
    assert asyncio.run(committed()) == [None, None]


def test_admin_topic_commands_name_a_topic_that_does_not_exist(
    server: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert admin(server, "topic", "delete", "NoSuchTopic") == EXIT_NOT_FOUND
    captured = capsys.readouterr()
    assert "topic NoSuchTopic does not exist" in captured.err and "deleted" not in captured.out
    assert admin(server, "topic", "update", "NoSuchTopic", "--order") == EXIT_NOT_FOUND
    assert "NoSuchTopic" in capsys.readouterr().err


def test_admin_topic_perm_is_validated(server: ServerProcess, capsys: pytest.CaptureFixture[str]) -> None:
    for perm in ("9", "0"):
        with pytest.raises(SystemExit) as exited:
            admin(server, "topic", "create", "PermTopic", "--perm", perm)
        assert exited.value.code == EXIT_USAGE
        assert "not a topic permission" in capsys.readouterr().err

    async def create_with_bad_perm() -> list[str]:
        async with AdminClient(server.addr) as client:
            with pytest.raises(ClientError, match="perm 9 is not a valid permission for topic PermTopic"):
                await client.create_topic("PermTopic", 2, perm=9)
            return await client.list_topics()

    assert "PermTopic" not in asyncio.run(create_with_bad_perm())


def test_admin_topic_update_changes_only_what_it_is_told_and_shows_it(
    server: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    assert admin(server, "topic", "create", "OrderTopic", "-q", "2") == 0
    capsys.readouterr()
    assert admin(server, "topic", "update", "OrderTopic", "--order") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].split()[1:] == ["2", "2", "6", "true"], out
    assert admin(server, "topic", "update", "OrderTopic", "-q", "3", "--perm", "4") == 0
    assert capsys.readouterr().out.splitlines()[-1].split()[1:] == ["3", "3", "4", "true"]

    async def stored() -> list[tuple[int, int, bool]]:
        async with AdminClient(server.addr) as client:
            configs = await client.topic_configs("OrderTopic")
            return [(c.read_queue_nums, c.perm, c.order) for c in configs.values()]

    assert asyncio.run(stored()) == [(3, 4, True)]


def test_admin_cli_follows_mqadmin_conventions(
    server: ServerProcess, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(_produce(server.addr, "RouteTopic", 2, 1))
    capsys.readouterr()
    # -n after the command, as mqadmin takes it.
    assert main(["admin", "topic", "list", "-n", server.addr]) == 0
    assert "RouteTopic" in capsys.readouterr().out
    # NAMESRV_ADDR is used, and said so in --help.
    monkeypatch.setenv("NAMESRV_ADDR", server.addr)
    assert main(["admin", "topic", "route", "RouteTopic"]) == 0
    route_text = capsys.readouterr().out
    assert len(route_text.splitlines()) > 10 and json.loads(route_text)["queueDatas"][0]["readQueueNums"] == 2
    with pytest.raises(SystemExit):
        main(["admin", "--help"])
    assert "NAMESRV_ADDR" in capsys.readouterr().out
    # A broker's port is not a name server's, and the error says so.
    broker = f"127.0.0.1:{server.extra_ports[0]}"
    assert main(["admin", "topic", "list", "-n", broker]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert f"{broker} is not a name server" in err and "looks like a broker" in err


def test_orbitmq_version_and_help_name_the_orbitmq_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("orbitmq ")
    for command in ("namesrv", "broker", "proxy", "cluster"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert capsys.readouterr().out.startswith(f"usage: orbitmq {command} ")
    assert main(["bench", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: orbitmq bench ")
    with pytest.raises(SystemExit):
        main(["bench", "latency", "--help"])
    assert "usage: orbitmq bench latency" in capsys.readouterr().out


def test_orbitmq_standalone_refuses_nameserver_port_zero(tmp_path: Path) -> None:
    # The broker would register with port 0: refused before anything starts (in a child, on
    # free ports, so that a regression serves nothing of this machine's defaults).
    args = [sys.executable, "-m", "orbitmq.cli", "standalone", "--namesrv-port", "0", "--broker-port",
            str(free_port()), "--no-proxy", "--data-dir", str(tmp_path / "data")]  # fmt: skip
    done = subprocess.run(args, capture_output=True, timeout=30)
    assert done.returncode == 2, done.stderr.decode()
    assert "--namesrv-port 0 is not a TCP port" in done.stderr.decode()
    assert not (tmp_path / "data").exists()
