"""Helpers of the ACL and TLS tests: a standalone with ACL on, its accounts file, signed admin."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from orbitmq.client import AdminClient
from tests.support.processes import ServerProcess, start_standalone, write_conf


def accounts_path(proc: ServerProcess) -> Path:
    """The accounts file of a standalone started by :func:`start_acl_standalone`."""
    return proc.workdir / "data" / "conf" / "plain_acl.yml"


def start_acl_standalone(
    tmp_path: Path, accounts: str, name: str = "acl-standalone", conf: Mapping[str, object] | None = None
) -> ServerProcess:
    """``orbitmq standalone -c broker.conf`` with ``aclEnable=true`` and ``accounts`` as its
    ``<data dir>/conf/plain_acl.yml``; ``conf`` adds broker.conf keys. ``extra_ports`` holds
    the broker port and the gRPC port (its proxy checks callers against the same accounts)."""
    workdir = tmp_path / name
    (workdir / "data" / "conf").mkdir(parents=True)
    (workdir / "data" / "conf" / "plain_acl.yml").write_text(accounts)
    config = write_conf(
        workdir / "broker.conf", {"aclEnable": True, "bindAddress": "127.0.0.1", **(conf or {})}
    )
    return start_standalone(tmp_path, "-c", str(config), name=name)


def create_topic_signed(namesrv: str, topic: str, access_key: str, secret_key: str, queues: int = 4) -> None:
    """Create ``topic`` on every broker with an admin account, once a broker has registered."""

    async def create() -> None:
        async with AdminClient(namesrv, access_key=access_key, secret_key=secret_key) as admin:
            for _ in range(300):
                if (await admin.cluster_info()).broker_addr_table:
                    break
                await asyncio.sleep(0.05)
            await admin.create_topic(topic, queues)

    asyncio.run(create())
