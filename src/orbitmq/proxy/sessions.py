"""The proxy's gRPC clients, keyed by ``x-mq-client-id``: settings, streams, liveness.

A client is known from its first request. The Telemetry stream brings its settings (its type,
the topics it publishes to, its consumer group) and is the only way the proxy can call it:
each open stream has an outbound queue the servicer drains, so a transaction check or a
verify command is a :meth:`SessionTable.push` onto one of the client's queues.

A client is *gone* when it says so (NotifyClientTermination), when its last Telemetry stream
closes (its process died or it shut down), or after ``grpcClientIdleTimeMills`` without any
request; the proxy then releases its auto-renewed deliveries (``broker.pop.renew``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from orbitmq.proxy._pb import definition_pb2 as pb
from orbitmq.proxy._pb import service_pb2 as spb
from orbitmq.proxy.convert import resource_name

__all__ = ["ClientSession", "SessionTable"]


@dataclass(slots=True)
class ClientSession:
    """One gRPC client."""

    client_id: str
    last_seen_ms: int
    language: str = ""
    version: str = ""
    client_type: int = pb.CLIENT_TYPE_UNSPECIFIED
    settings: pb.Settings | None = None
    group: str | None = None
    topics: set[str] = field(default_factory=set)
    streams: list[asyncio.Queue[spb.TelemetryCommand | None]] = field(default_factory=list)

    @property
    def is_producer(self) -> bool:
        return self.client_type == pb.PRODUCER


class SessionTable:
    """Every known client; not thread-safe (the proxy's event loop owns it)."""

    def __init__(self, idle_ms: int) -> None:
        self._idle_ms = idle_ms
        self._sessions: dict[str, ClientSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, client_id: str) -> ClientSession | None:
        return self._sessions.get(client_id)

    def touch(self, client_id: str, now_ms: int, language: str = "", version: str = "") -> ClientSession:
        """The client's session (created on first sight), marked alive now."""
        session = self._sessions.get(client_id)
        if session is None:
            session = self._sessions[client_id] = ClientSession(client_id, now_ms, language, version)
        session.last_seen_ms = now_ms
        if language:
            session.language = language
        if version:
            session.version = version
        return session

    def update_settings(self, session: ClientSession, settings: pb.Settings) -> None:
        session.settings = settings
        session.client_type = settings.client_type
        if settings.HasField("publishing"):
            session.topics.update(resource_name(topic) for topic in settings.publishing.topics)
        if settings.HasField("subscription"):
            session.group = resource_name(settings.subscription.group)
            session.topics.update(resource_name(entry.topic) for entry in settings.subscription.subscriptions)

    def open_stream(self, session: ClientSession) -> asyncio.Queue[spb.TelemetryCommand | None]:
        queue: asyncio.Queue[spb.TelemetryCommand | None] = asyncio.Queue()
        session.streams.append(queue)
        return queue

    def close_stream(self, session: ClientSession, queue: asyncio.Queue[spb.TelemetryCommand | None]) -> bool:
        """Forget one stream; True when it was the client's last (the client is then gone)."""
        if queue in session.streams:
            session.streams.remove(queue)
        return not session.streams

    def push(self, client_id: str, command: spb.TelemetryCommand) -> bool:
        """Queue ``command`` on one of the client's streams; False when it has none open."""
        session = self._sessions.get(client_id)
        if session is None or not session.streams:
            return False
        session.streams[-1].put_nowait(command)
        return True

    def producers_of(self, topic: str) -> list[ClientSession]:
        """Producers with an open stream that publish to ``topic``, most recently seen first."""
        found = [s for s in self._sessions.values() if s.is_producer and s.streams and topic in s.topics]
        return sorted(found, key=lambda s: s.last_seen_ms, reverse=True)

    def remove(self, client_id: str) -> ClientSession | None:
        session = self._sessions.pop(client_id, None)
        if session is not None:
            for queue in session.streams:
                queue.put_nowait(None)  # ends the stream's response generator
        return session

    def expired(self, now_ms: int) -> list[str]:
        """Clients idle for longer than the limit, with no stream open."""
        return [
            client_id
            for client_id, session in self._sessions.items()
            if now_ms - session.last_seen_ms > self._idle_ms and not session.streams
        ]
