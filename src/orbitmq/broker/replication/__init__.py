"""Master/slave replication (RocketMQ 4.x classic HA, ha-replication.md §1-§4).

============  ===============================================================================
module        owns
============  ===============================================================================
codec         the HA link's frames, sans-IO (offset reports, transfer frames)
acks          pure state: per-slave sent and acknowledged offsets, SYNC_MASTER wait groups
master        the HA port: one streaming loop per slave, acknowledgements, waits
slave         the HA client: report, append through the store's raw path, reconnect
metadata      SlaveSynchronize: topics, offsets, groups, delay and timer progress
service       the role's assembly, as the rest of the broker sees it
============  ===============================================================================

The store stays a library with no networking: replication calls
``MessageStore.read_commit_log`` on a master and ``MessageStore.append_commit_log`` on a
slave. Sockets come from ``transport.stream``.
"""

from orbitmq.broker.replication.service import ReplicationService

__all__ = ["ReplicationService"]
