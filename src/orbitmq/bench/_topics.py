"""The benchmark's topic on the server it runs against: created when missing, removed afterwards.

Against a running server (``--namesrv``) a benchmark must not leave its topics behind: they
would show in ``topic list``, in consumer progress and in the operations report. Only what
the benchmark created is removed (its topic, and the ``%RETRY%<group>`` topic a broker
creates when a consumer group first heartbeats); a topic that existed before is kept.
"""

from __future__ import annotations

import asyncio
from typing import Any

from orbitmq.client.admin import AdminClient
from orbitmq.errors import OrbitError

__all__ = ["BenchTopic"]


class BenchTopic:
    """One benchmark topic (and the retry topics of ``groups``) on the cluster at ``namesrv``.

    ``client_options`` go to the admin client (credentials and TLS of a secured cluster).
    """

    def __init__(
        self,
        namesrv: str,
        topic: str,
        queues: int,
        groups: tuple[str, ...] = (),
        client_options: dict[str, Any] | None = None,
    ) -> None:
        self.namesrv = namesrv
        self._options = dict(client_options or {})
        self.topic = topic
        self.queues = queues
        self._names = [topic, *(f"%RETRY%{group}" for group in groups)]
        self._existed: set[str] = set()

    async def create(self) -> None:
        """Wait for a broker, then create the topic unless it exists (its queues are kept then)."""
        async with AdminClient(self.namesrv, **self._options) as admin:
            for _ in range(200):
                if (await admin.cluster_info()).broker_addr_table:
                    break
                await asyncio.sleep(0.05)
            self._existed = set(self._names) & set(await admin.list_topics())
            if self.topic not in self._existed:
                await admin.create_topic(self.topic, self.queues)

    async def remove_created(self) -> list[str]:
        """Delete the topics this benchmark created; returns their names (failures are printed)."""
        removed = []
        async with AdminClient(self.namesrv, **self._options) as admin:
            present = set(await admin.list_topics())
            for name in self._names:
                if name in present and name not in self._existed:
                    try:
                        await admin.delete_topic(name)
                        removed.append(name)
                    except OrbitError as exc:
                        print(f"could not remove topic {name}: {exc}")
        if removed:
            print(f"removed the benchmark's topics: {', '.join(removed)}")
        return removed

    async def write_queues(self) -> list[tuple[str, int]]:
        """``(master address, queue id)`` of every writable queue of the topic, by broker name."""
        async with AdminClient(self.namesrv, **self._options) as admin:
            route = await admin.topic_route(self.topic)
        masters = {broker.broker_name: broker.master_addr for broker in route.broker_datas}
        return [
            (addr, queue_id)
            for data in sorted(route.queue_datas, key=lambda data: data.broker_name)
            if data.writable and (addr := masters.get(data.broker_name)) is not None
            for queue_id in range(data.write_queue_nums)
        ]
