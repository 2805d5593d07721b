"""The broker's topic table: which topics it hosts, with how many queues and which permissions.

Every change bumps the table's DataVersion, which the name server compares on registration,
and marks the table dirty so the persistence service rewrites ``<root>/config/topics.json``
(RocketMQ's TopicConfigSerializeWrapper JSON: ``{"topicConfigTable": {...}, "dataVersion":
{...}}``).

The document costs what changed, not what the table holds: the table keeps each topic's
encoded entry and remembers which topics changed since the last :meth:`TopicConfigTable.document`;
that call re-encodes those entries only and joins the rest as they are (bytes, in one pass).
With 50,000 topics, encoding the whole table for each one created made topic creation
quadratic and held the event loop for a quarter of a second per change. The same document
answers GET_ALL_TOPIC_CONFIG and is the JSON registration body's table.

Topics come from four places:

- system topics created at start-up (TBW102 when auto-creation is on, SELF_TEST_TOPIC,
  OFFSET_MOVED_EVENT, SCHEDULE_TOPIC_XXXX with 18 queues, the cluster and broker name topics);
- UPDATE_AND_CREATE_TOPIC from an admin, whose ``attributes`` header changes the topic's RocketMQ 5
  attributes (``+message.type=FIFO``; :meth:`TopicConfigTable.update`) and keeps those it does
  not name;
- a send to an unknown topic, through the template named by the request's ``defaultTopic``
  (normally TBW102): allowed only when auto-creation is on and the template has the inherit
  bit; the new topic gets ``min(request queue count, template write queues)`` queues and the
  template's permission without the inherit bit;
- ``%RETRY%<group>`` (1 queue, perm 6) on consumer heartbeat and ``%DLQ%<group>`` on send-back.

Every topic but the system ones counts against ``maxTopicsPerBroker``: creating one more
raises a BrokerResponseError (SYSTEM_ERROR) that names the limit, so every request that would
create a topic (an admin's, an auto-creating send, a send-back, a heartbeat's retry topic)
gets that answer. The table holds only topics its loader accepts (``topic_config_problem``);
a damaged entry of topics.json is skipped with a warning at load, and the broker starts.

Pure state behind a lock; no I/O.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import replace

import orjson

from orbitmq.broker.validation import (
    AUTO_CREATE_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
)
from orbitmq.errors import BrokerResponseError, RemoteProtocolError
from orbitmq.model.route import PERM_INHERIT, PERM_READ_WRITE, DataVersion, TopicConfig
from orbitmq.model.topic_attributes import AttributeError_, alter_attributes
from orbitmq.protocol.bodies import (
    TopicConfigSerializeWrapper,
    decode_data_version,
    decode_topic_config,
    encode_topic_config_entry,
    join_topic_config_wrapper,
    topic_config_problem,
)
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.names import shorten

logger = logging.getLogger(__name__)

SCHEDULE_TOPIC_QUEUE_NUMS = 18
"""One queue per delay level."""


def _now_ms() -> int:
    return int(time.time() * 1000)


class TopicConfigTable:
    """Topic configs by name, versioned (thread-safe).

    Args:
        topics_max: most topics the table holds (0 = no limit); system topics are always added.
    """

    def __init__(self, topics_max: int = 0) -> None:
        self._topics: dict[str, TopicConfig] = {}
        self._lock = threading.Lock()
        self._data_version = DataVersion(_now_ms(), 0)
        self._dirty = False
        self.topics_max = topics_max
        # Encoded entries by topic, and the topics changed since they were last brought up to
        # date (None: every topic). One document is built at a time (_entries_lock, taken
        # before _lock), so no two builders apply the same changes in different orders.
        self._entries: dict[str, bytes] = {}
        self._changed: set[str] | None = None
        self._entries_lock = threading.Lock()
        self._document: tuple[DataVersion, bytes] | None = None

    def _check_room(self, config: TopicConfig) -> None:
        """Raise unless ``config`` may be added (lock held): a legal topic, and room for a new one."""
        problem = topic_config_problem(config)
        if problem is not None:
            raise BrokerResponseError(ResponseCode.SYSTEM_ERROR, problem)
        if self.topics_max and config.topic_name not in self._topics and len(self._topics) >= self.topics_max:
            raise BrokerResponseError(
                ResponseCode.SYSTEM_ERROR,
                f"cannot create topic {config.topic_name}: this broker already has {len(self._topics)} "
                f"topics (maxTopicsPerBroker={self.topics_max})",
            )

    # -- reads -------------------------------------------------------------------------------

    def get(self, topic: str) -> TopicConfig | None:
        return self._topics.get(topic)

    def __contains__(self, topic: object) -> bool:
        return topic in self._topics

    def __len__(self) -> int:
        return len(self._topics)

    def names(self) -> list[str]:
        return list(self._topics)

    @property
    def data_version(self) -> DataVersion:
        return self._data_version

    @property
    def dirty(self) -> bool:
        return self._dirty

    def snapshot(self) -> TopicConfigSerializeWrapper:
        """A consistent copy of the table and its version (for registration and GET_ALL_TOPIC_CONFIG)."""
        with self._lock:
            return TopicConfigSerializeWrapper(dict(self._topics), self._data_version)

    # -- writes ------------------------------------------------------------------------------

    def put(self, config: TopicConfig, *, system: bool = False) -> bool:
        """Create or replace a topic; True when something changed.

        Raises:
            BrokerResponseError: the config is not legal, or the table is full (unless ``system``).
        """
        with self._lock:
            if self._topics.get(config.topic_name) == config:
                return False
            if not system:
                self._check_room(config)
            self._topics[config.topic_name] = config
            self._bump(config.topic_name)
            return True

    def update(self, config: TopicConfig, attribute_changes: Mapping[str, str]) -> bool:
        """An admin's UPDATE_AND_CREATE_TOPIC: ``config`` with its attributes altered by
        ``attribute_changes`` (``+key`` / ``-key``, ``model.topic_attributes``) from the topic's
        current ones; True when something changed.

        Raises:
            BrokerResponseError: SYSTEM_ERROR with RocketMQ's words for a refused attribute
                change; as :meth:`put` otherwise.
        """
        with self._lock:
            existing = self._topics.get(config.topic_name)
            try:
                attributes = alter_attributes(
                    existing is None, existing.attributes if existing else {}, attribute_changes
                )
            except AttributeError_ as exc:
                raise BrokerResponseError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
            config = replace(config, attributes=attributes)
            if existing == config:
                return False
            self._check_room(config)
            self._topics[config.topic_name] = config
            self._bump(config.topic_name)
            return True

    def remove(self, topic: str) -> bool:
        """Delete a topic; True when it existed."""
        with self._lock:
            if self._topics.pop(topic, None) is None:
                return False
            self._bump(topic)
            return True

    def create_system_topics(
        self,
        cluster_name: str,
        broker_name: str,
        *,
        auto_create_topic_enable: bool,
        default_topic_queue_nums: int,
    ) -> None:
        """The topics a RocketMQ broker creates at start-up (existing configs are kept)."""
        wanted = [
            TopicConfig(SELF_TEST_TOPIC, 1, 1),
            TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
            TopicConfig(SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUMS, SCHEDULE_TOPIC_QUEUE_NUMS),
            TopicConfig(cluster_name, 16, 16, perm=PERM_INHERIT | PERM_READ_WRITE),
            TopicConfig(broker_name, 1, 1, perm=PERM_INHERIT | PERM_READ_WRITE),
            TopicConfig(f"{cluster_name}_REPLY_TOPIC", 1, 1),
        ]
        if auto_create_topic_enable:
            wanted.append(
                TopicConfig(
                    AUTO_CREATE_TOPIC,
                    default_topic_queue_nums,
                    default_topic_queue_nums,
                    perm=PERM_INHERIT | PERM_READ_WRITE,
                )
            )
        for config in wanted:
            if config.topic_name not in self._topics:
                self.put(config, system=True)

    def create_from_template(
        self, topic: str, template_topic: str, queue_nums: int, *, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """Auto-create ``topic`` on send through ``template_topic``; None when not allowed.

        The caller checks ``autoCreateTopicEnable`` (TBW102 exists only when it is on).
        """
        with self._lock:
            existing = self._topics.get(topic)
            if existing is not None:
                return existing
            template = self._topics.get(template_topic)
            if template is None or not template.perm & PERM_INHERIT:
                return None
            count = max(1, min(queue_nums, template.write_queue_nums))
            config = TopicConfig(
                topic,
                read_queue_nums=count,
                write_queue_nums=count,
                perm=template.perm & ~PERM_INHERIT,
                topic_sys_flag=topic_sys_flag,
            )
            self._check_room(config)
            self._topics[topic] = config
            self._bump(topic)
            return config

    def find_or_create(self, topic: str, queue_nums: int, perm: int = PERM_READ_WRITE) -> TopicConfig:
        """The topic, created with ``queue_nums`` queues when missing (retry and DLQ topics)."""
        with self._lock:
            existing = self._topics.get(topic)
            if existing is not None:
                return existing
            config = TopicConfig(topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums, perm=perm)
            self._check_room(config)
            self._topics[topic] = config
            self._bump(topic)
            return config

    def update_perm(self, topic: str, perm: int) -> TopicConfig | None:
        """Change a topic's permission bits; None when the topic does not exist."""
        config = self._topics.get(topic)
        if config is None:
            return None
        updated = replace(config, perm=perm)
        self.put(updated)
        return updated

    def _bump(self, topic: str) -> None:
        self._data_version = self._data_version.bumped(_now_ms())
        self._dirty = True
        if self._changed is not None:
            self._changed.add(topic)

    def adopt(self, wrapper: TopicConfigSerializeWrapper) -> bool:
        """A slave takes its master's whole table and version, unless the version is the same.

        Returns True when the table changed (SlaveSynchronize, ha-replication §3).
        """
        with self._lock:
            if wrapper.data_version == self._data_version:
                return False
            self._topics = dict(wrapper.topic_config_table)
            self._data_version = wrapper.data_version
            self._dirty = True
            self._changed = None
            return True

    # -- persistence -------------------------------------------------------------------------

    def document(self) -> bytes:
        """The table as topics.json and GET_ALL_TOPIC_CONFIG's body (any thread; see the module
        docstring: only the topics changed since the last call are encoded)."""
        with self._entries_lock:
            with self._lock:
                version = self._data_version
                cached = self._document
                if (
                    cached is not None
                    and cached[0] == version
                    and self._changed is not None
                    and not self._changed
                ):
                    return cached[1]
                topics = dict(self._topics)
                changed, self._changed = self._changed, set()
            entries = self._entries
            if changed is None:
                entries.clear()
                changed = set(topics)
            for name in changed:
                config = topics.get(name)
                if config is None:
                    entries.pop(name, None)
                else:
                    entries[name] = encode_topic_config_entry(name, config)
            document = join_topic_config_wrapper(version, [entries[name] for name in topics])
            self._document = (version, document)
            return document

    def mark_dirty(self) -> None:
        """Persist again (a write of the table failed)."""
        with self._lock:
            self._dirty = True

    def encode(self) -> bytes:
        """The table as topics.json (:meth:`document`); clears the dirty flag first, so a change
        made meanwhile marks it again."""
        with self._lock:
            self._dirty = False
        return self.document()

    @classmethod
    def decode(cls, data: bytes, source: str = "topics.json", topics_max: int = 0) -> TopicConfigTable:
        """Load topics.json; an entry that is damaged or breaks a topic rule is skipped with a warning.

        Raises:
            RemoteProtocolError: the document is not JSON or has no topicConfigTable object.
        """
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise RemoteProtocolError(f"{source}: not valid JSON: {exc}") from exc
        raw = document.get("topicConfigTable") if isinstance(document, dict) else None
        if not isinstance(raw, dict):
            raise RemoteProtocolError(f"{source}: no 'topicConfigTable' object")
        table = cls(topics_max)
        for name, value in raw.items():
            try:
                config = decode_topic_config(value, f"topic {shorten(name)}")
                problem = topic_config_problem(config)
                if problem is None and config.topic_name != name:
                    problem = f"entry {shorten(name)} holds topic {shorten(config.topic_name)}"
            except RemoteProtocolError as exc:
                problem = str(exc)
            if problem is not None:
                logger.warning("%s: topic entry skipped: %s", source, problem)
                continue
            table._topics[name] = config
        try:
            table._data_version = decode_data_version(orjson.dumps(document.get("dataVersion") or {}))
        except RemoteProtocolError as exc:
            logger.warning("%s: dataVersion unreadable (%s); starting a new one", source, exc)
        return table
