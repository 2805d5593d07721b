"""Producer and consumer tables: who is connected, in which group, subscribed to what.

Filled by HEART_BEAT, emptied by UNREGISTER_CLIENT, by a connection closing, and by the expiry
scan (a client silent for ``channelExpiredTimeout``, 120 s by default, is dropped). Entries are
keyed by connection id: one client process shares one connection per broker for all its groups,
as RocketMQ keys them by channel.

The consumer table reports whether a heartbeat or removal *changed* a group (a member joined or
left, or its subscriptions differ), because the broker must then send NOTIFY_CONSUMER_IDS_CHANGED
to every member so they rebalance.

Both tables are bounded: a heartbeat that would add a group past ``groups_max`` is refused
with a BrokerResponseError naming the limit (``maxProducerGroups``, ``maxConsumerGroups``);
``member_count`` lets the heartbeat handler bound the memberships of both tables together.

Pure state: time is passed in and the channel is an opaque value (the transport connection).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from orbitmq.errors import BrokerResponseError, FilterExpressionError
from orbitmq.filter import MessageFilter, TagExpressionFilter, compiled_filter
from orbitmq.model.heartbeat import SubscriptionData
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.tags import TagFilter

C = TypeVar("C")


@dataclass(slots=True)
class ClientChannel(Generic[C]):
    """One client connection as seen by one group."""

    connection_id: int
    client_id: str
    language: str
    version: int
    last_update_ms: int
    channel: C


@dataclass(frozen=True, slots=True)
class GroupSubscription:
    """What a consumer group subscribed to on one topic, as the last heartbeat said.

    ``message_filter`` is compiled from ``expression`` (a TAG filter is recomputed from the
    tags: the C++ client's ``codeSet`` is wrong); compilations are cached by expression, so
    a subscription is compiled once however often it is heartbeated. An expression that does
    not compile leaves ``message_filter`` None and ``parse_error`` saying why: pulls of the
    group then answer SUBSCRIPTION_PARSE_FAILED.
    """

    topic: str
    expression: str
    expression_type: str
    sub_version: int
    message_filter: MessageFilter | None
    parse_error: str = ""

    @classmethod
    def parse(
        cls, topic: str, expression: str, expression_type: str = "TAG", sub_version: int = 0
    ) -> GroupSubscription:
        kind = expression_type or "TAG"
        try:
            message_filter: MessageFilter | None = compiled_filter(kind, expression)
            error = ""
        except FilterExpressionError as exc:
            message_filter, error = None, str(exc)
        return cls(topic, expression or "*", kind, sub_version, message_filter, error)

    def subscription_data(self) -> SubscriptionData:
        """This subscription as RocketMQ's SubscriptionData (admin answers carry it)."""
        tag_filter = self.tag_filter
        return SubscriptionData(
            topic=self.topic,
            sub_string=self.expression,
            tags_set=tag_filter.tags if tag_filter else frozenset(),
            code_set=tag_filter.codes if tag_filter else frozenset(),
            sub_version=self.sub_version,
            expression_type=self.expression_type,
        )

    @property
    def tag_filter(self) -> TagFilter | None:
        """The TAG filter of a TAG subscription (None for SQL92 or a failed compilation)."""
        if isinstance(self.message_filter, TagExpressionFilter):
            return self.message_filter.tag_filter
        return None

    def same_as(self, other: GroupSubscription) -> bool:
        """Equal for rebalancing purposes (the version alone changing is not a change)."""
        return self.expression == other.expression and self.expression_type == other.expression_type


@dataclass(slots=True)
class ConsumerGroup(Generic[C]):
    """The live members of one consumer group and their common subscriptions."""

    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[int, ClientChannel[C]] = field(default_factory=dict)
    subscriptions: dict[str, GroupSubscription] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return [entry.client_id for entry in self.channels.values()]


def _check_room(groups: Mapping[str, object], group: str, groups_max: int, key: str) -> None:
    if groups_max and group not in groups and len(groups) >= groups_max:
        raise BrokerResponseError(
            ResponseCode.SYSTEM_ERROR,
            f"cannot track group {group}: {len(groups)} groups tracked ({key}={groups_max})",
        )


class ProducerTable(Generic[C]):
    """Producer groups and their live connections (used for transaction check-backs)."""

    def __init__(self, groups_max: int = 0) -> None:
        self._groups: dict[str, dict[int, ClientChannel[C]]] = {}
        self.groups_max = groups_max

    @property
    def member_count(self) -> int:
        """Memberships tracked: (group, connection) pairs."""
        return sum(len(members) for members in self._groups.values())

    def is_member(self, group: str, connection_id: int) -> bool:
        return connection_id in self._groups.get(group, {})

    def register(self, group: str, entry: ClientChannel[C]) -> None:
        """Record a heartbeat of one member.

        Raises:
            BrokerResponseError: the group is new and ``groups_max`` groups are tracked already.
        """
        _check_room(self._groups, group, self.groups_max, "maxProducerGroups")
        self._groups.setdefault(group, {})[entry.connection_id] = entry

    def unregister(self, group: str, connection_id: int) -> bool:
        """Remove one connection from a group; True when it was there."""
        members = self._groups.get(group)
        if members is None or members.pop(connection_id, None) is None:
            return False
        if not members:
            del self._groups[group]
        return True

    def on_connection_closed(self, connection_id: int) -> list[str]:
        """Drop a closed connection everywhere; returns the groups it left."""
        return [group for group in list(self._groups) if self.unregister(group, connection_id)]

    def scan_expired(self, now_ms: int, expiry_ms: int) -> list[tuple[str, str]]:
        """Drop entries silent for longer than ``expiry_ms``; returns (group, client_id) dropped."""
        dropped: list[tuple[str, str]] = []
        for group, members in list(self._groups.items()):
            for connection_id, entry in list(members.items()):
                if now_ms - entry.last_update_ms > expiry_ms:
                    dropped.append((group, entry.client_id))
                    self.unregister(group, connection_id)
        return dropped

    def channels(self, group: str) -> list[ClientChannel[C]]:
        return list(self._groups.get(group, {}).values())

    def find_by_client_id(self, client_id: str) -> ClientChannel[C] | None:
        """The newest connection of client ``client_id`` in any producer group (request-reply)."""
        found = [
            entry
            for members in self._groups.values()
            for entry in members.values()
            if entry.client_id == client_id
        ]
        return max(found, key=lambda entry: entry.last_update_ms) if found else None

    def groups(self) -> list[str]:
        return list(self._groups)


class ConsumerTable(Generic[C]):
    """Consumer groups: members, subscriptions and consumption settings."""

    def __init__(self, groups_max: int = 0) -> None:
        self._groups: dict[str, ConsumerGroup[C]] = {}
        self.groups_max = groups_max

    @property
    def member_count(self) -> int:
        """Memberships tracked: (group, connection) pairs."""
        return sum(len(info.channels) for info in self._groups.values())

    def is_member(self, group: str, connection_id: int) -> bool:
        info = self._groups.get(group)
        return info is not None and connection_id in info.channels

    def register(
        self,
        group: str,
        entry: ClientChannel[C],
        subscriptions: Iterable[GroupSubscription],
        *,
        consume_type: str = "CONSUME_PASSIVELY",
        message_model: str = "CLUSTERING",
        consume_from_where: str = "CONSUME_FROM_LAST_OFFSET",
    ) -> bool:
        """Record a heartbeat of one member; True when the group's members or subscriptions changed.

        Raises:
            BrokerResponseError: the group is new and ``groups_max`` groups are tracked already.
        """
        _check_room(self._groups, group, self.groups_max, "maxConsumerGroups")
        info = self._groups.get(group)
        if info is None:
            info = ConsumerGroup(group)
            self._groups[group] = info
        info.consume_type = consume_type
        info.message_model = message_model
        info.consume_from_where = consume_from_where
        previous = info.channels.get(entry.connection_id)
        members_changed = previous is None or previous.client_id != entry.client_id
        info.channels[entry.connection_id] = entry
        return self._update_subscriptions(info, subscriptions) or members_changed

    @staticmethod
    def _update_subscriptions(info: ConsumerGroup[C], subscriptions: Iterable[GroupSubscription]) -> bool:
        new = {subscription.topic: subscription for subscription in subscriptions}
        old = info.subscriptions
        changed = new.keys() != old.keys() or any(not new[topic].same_as(old[topic]) for topic in new)
        # A heartbeat carrying an older subscription version than the one stored must not roll
        # the group back (members of one group may heartbeat out of order).
        for topic, subscription in new.items():
            current = old.get(topic)
            if (
                current is not None
                and current.sub_version > subscription.sub_version
                and current.same_as(subscription)
            ):
                new[topic] = current
        info.subscriptions = new
        return changed

    def unregister(self, group: str, connection_id: int) -> bool:
        """Remove one member; True when it was a member (the group changed)."""
        info = self._groups.get(group)
        if info is None or info.channels.pop(connection_id, None) is None:
            return False
        if not info.channels:
            del self._groups[group]
        return True

    def on_connection_closed(self, connection_id: int) -> list[str]:
        """Drop a closed connection from every group; returns the groups that changed."""
        return [group for group in list(self._groups) if self.unregister(group, connection_id)]

    def scan_expired(self, now_ms: int, expiry_ms: int) -> list[str]:
        """Drop members silent for longer than ``expiry_ms``; returns the groups that changed."""
        changed: list[str] = []
        for group, info in list(self._groups.items()):
            expired = [
                cid for cid, entry in info.channels.items() if now_ms - entry.last_update_ms > expiry_ms
            ]
            for connection_id in expired:
                self.unregister(group, connection_id)
            if expired:
                changed.append(group)
        return changed

    def get(self, group: str) -> ConsumerGroup[C] | None:
        return self._groups.get(group)

    def client_ids(self, group: str) -> list[str]:
        info = self._groups.get(group)
        return [] if info is None else info.client_ids()

    def channels(self, group: str) -> list[ClientChannel[C]]:
        info = self._groups.get(group)
        return [] if info is None else list(info.channels.values())

    def subscription(self, group: str, topic: str) -> GroupSubscription | None:
        info = self._groups.get(group)
        return None if info is None else info.subscriptions.get(topic)

    def groups(self) -> list[str]:
        return list(self._groups)
