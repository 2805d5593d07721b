"""The consensus adapter: PySyncObj's Raft log carrying :class:`ControllerState` commands.

Consensus is PySyncObj's (``pysyncobj``, Raft, maintained, pure Python), not ours: this module
only hands it commands and reads back results. Each controller process embeds one Raft node;
``controllerDLegerPeers`` lists the Raft addresses of all of them (``n0-host:port;n1-...``) and
``controllerDLegerSelfId`` names this one. PySyncObj runs its own thread (its ``autoTick``): it
applies committed commands to :class:`_ReplicatedState` on that thread, so readers on the event
loop take ``lock`` while looking at the state.

A command proposed on a follower is forwarded to the leader by PySyncObj; the result comes back
to the proposer. :meth:`RaftLog.propose` turns that callback into an awaitable. The log and the
state's snapshots are kept under ``controllerStorePath`` (PySyncObj's journal and full dump), so
a controller that restarts keeps its vote and its log: Raft's safety needs both.

Bending the layers on purpose: PySyncObj owns its sockets and thread; they are Raft's, and it
is the point of using it that we do not write that part.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated

from orbitmq.controller.state import ControllerState, Outcome
from orbitmq.store.dir_lock import lock_store_dir

__all__ = ["ConsensusError", "RaftLog"]

logger = logging.getLogger(__name__)


class ConsensusError(Exception):
    """A command was not committed (no leader, lost leadership, queue full)."""


class _ReplicatedState(SyncObjConsumer):  # type: ignore[misc]
    """The state machine PySyncObj replicates; ``state`` is what its snapshots hold."""

    def __init__(self) -> None:
        super().__init__()
        # Set after SyncObjConsumer.__init__: attributes created later are the replicated ones.
        self.state = ControllerState()

    @replicated  # type: ignore[untyped-decorator]
    def apply(self, command: dict[str, Any]) -> Outcome:
        with RaftLog.lock:
            return self.state.apply(command)


class RaftLog:
    """One Raft node of the controller group (see the module docstring)."""

    lock = threading.Lock()  # held while a command applies; readers take it too

    def __init__(
        self,
        self_address: str,
        peer_addresses: list[str],
        store_dir: Path,
        election_timeout_ms: tuple[int, int] = (400, 1400),
    ) -> None:
        # One controller per journal: a second one would write the same Raft log.
        self._dir_lock = lock_store_dir(store_dir, "controller store")
        low_ms, high_ms = election_timeout_ms
        conf = SyncObjConf(
            journalFile=str(store_dir / "raft.journal"),
            fullDumpFile=str(store_dir / "raft.dump"),
            raftMinTimeout=low_ms / 1000,
            raftMaxTimeout=high_ms / 1000,
            appendEntriesPeriod=max(low_ms / 4000, 0.02),
            # A leader cut off from the others steps down after this, so a resumed or isolated
            # node stops acting as leader on its own.
            leaderFallbackTimeout=high_ms * 2 / 1000,
            connectionRetryTime=max(low_ms / 1000, 0.2),
            dynamicMembershipChange=False,
        )
        self.self_address = self_address
        self._replicated = _ReplicatedState()
        try:
            self._node = SyncObj(self_address, peer_addresses, conf=conf, consumers=[self._replicated])
        except BaseException:
            self._dir_lock.release()
            raise

    @property
    def state(self) -> ControllerState:
        state: ControllerState = self._replicated.state
        return state

    @property
    def is_leader(self) -> bool:
        return bool(self._node._isLeader())

    @property
    def leader_address(self) -> str:
        leader = self._node._getLeader()
        return str(leader.address) if leader is not None else ""

    @property
    def term(self) -> int:
        return int(self._node._getTerm())

    async def propose(self, command: dict[str, Any], timeout_s: float = 3.0) -> Outcome:
        """Commit ``command`` through the Raft log and return its result on this node.

        Raises:
            ConsensusError: not committed (no leader, leadership lost, timeout).
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()

        def done(result: Any, error: int) -> None:
            loop.call_soon_threadsafe(_settle, future, result, error)

        self._replicated.apply(command, callback=done)
        try:
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError:
            raise ConsensusError(f"command not committed within {timeout_s:.1f} s") from None

    def status(self) -> dict[str, Any]:
        raw = self._node.getStatus()
        return {
            "self": self.self_address,
            "leader": self.leader_address,
            "isLeader": self.is_leader,
            "term": raw.get("raft_term"),
            "commitIndex": raw.get("commit_idx"),
        }

    def close(self) -> None:
        self._node.destroy_synchronous()
        self._dir_lock.release()


def _settle(future: asyncio.Future[Outcome], result: Any, error: int) -> None:
    if future.done():
        return
    if error == FAIL_REASON.SUCCESS and isinstance(result, Outcome):
        future.set_result(result)
    else:
        future.set_exception(ConsensusError(f"command not committed (PySyncObj reason {error})"))
