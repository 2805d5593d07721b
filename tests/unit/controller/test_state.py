"""The controller's replicated state machine and election policy (pure)."""

from __future__ import annotations

from orbitmq.controller.liveness import Heartbeat, Liveness
from orbitmq.controller.state import NO_MASTER, Candidate, ControllerState, choose_master


def _register(state: ControllerState, address: str, broker_id: int = -1) -> int:
    outcome = state.apply(
        {
            "type": "register",
            "clusterName": "c",
            "brokerName": "g",
            "brokerId": broker_id,
            "brokerAddress": address,
        }
    )
    assert outcome.code == 0
    return outcome.broker_id


def test_state_register_assigns_ids_and_keeps_them() -> None:
    state = ControllerState()
    assert _register(state, "a:1") == 1
    assert _register(state, "a:2") == 2
    assert _register(state, "a:1", broker_id=1) == 1
    assert state.groups["g"].replicas == {1: "a:1", 2: "a:2"}


def test_state_elect_bumps_epochs_and_is_fenced_by_expected_epoch() -> None:
    state = ControllerState()
    first, second = _register(state, "a:1"), _register(state, "a:2")
    won = state.apply({"type": "elect", "brokerName": "g", "brokerId": first, "expectedMasterEpoch": 0})
    assert won.code == 0 and won.group is not None
    assert (won.group["masterBrokerId"], won.group["masterEpoch"], won.group["syncStateSet"]) == (
        first,
        1,
        [first],
    )
    # A second election decided on the same (now stale) view loses.
    lost = state.apply({"type": "elect", "brokerName": "g", "brokerId": second, "expectedMasterEpoch": 0})
    assert lost.code == 2000
    assert state.groups["g"].master_id == first


def test_state_alter_sync_state_set_checks_master_epochs_and_members() -> None:
    state = ControllerState()
    first, second = _register(state, "a:1"), _register(state, "a:2")
    state.apply({"type": "elect", "brokerName": "g", "brokerId": first, "expectedMasterEpoch": 0})
    base = {"type": "alter_sss", "brokerName": "g", "masterBrokerId": first, "masterEpoch": 1}
    assert state.apply({**base, "syncStateSetEpoch": 0, "syncStateSet": [first, second]}).code == 2001
    assert state.apply({**base, "syncStateSetEpoch": 1, "syncStateSet": [second]}).code == 2003
    assert state.apply({**base, "syncStateSetEpoch": 1, "syncStateSet": [first, 9]}).code == 2003
    assert (
        state.apply({**base, "masterBrokerId": second, "syncStateSetEpoch": 1, "syncStateSet": [second]}).code
        == 2002
    )
    done = state.apply({**base, "syncStateSetEpoch": 1, "syncStateSet": [first, second]})
    assert done.code == 0 and state.groups["g"].sync_state_set == {first, second}
    assert state.groups["g"].sync_state_set_epoch == 2


def test_choose_master_only_from_live_sync_state_set_members() -> None:
    state = ControllerState()
    ids = [_register(state, f"a:{n}") for n in range(3)]
    group = state.groups["g"]
    # The first election may take any live replica: the one furthest ahead.
    live = {i: Candidate(i, 0, 100 * i) for i in ids}
    assert choose_master(group, live) == ids[2]
    state.apply({"type": "elect", "brokerName": "g", "brokerId": ids[2], "expectedMasterEpoch": 0})
    assert choose_master(group, live) is None  # the master is alive
    group.sync_state_set = {ids[2], ids[0]}
    del live[ids[2]]
    # ids[1] is further ahead but outside the SyncStateSet: never elected (no unclean election).
    assert choose_master(group, live) == ids[0]
    del live[ids[0]]
    assert choose_master(group, live) == NO_MASTER
    assert choose_master(group, live, unclean=True) == ids[1]


def test_choose_master_prefers_epoch_then_offset_then_priority() -> None:
    state = ControllerState()
    ids = [_register(state, f"a:{n}") for n in range(3)]
    group = state.groups["g"]
    group.master_epoch, group.master_id, group.sync_state_set = 3, 99, set(ids)
    live = {
        ids[0]: Candidate(ids[0], 3, 10),
        ids[1]: Candidate(ids[1], 2, 500),
        ids[2]: Candidate(ids[2], 3, 10, -1),
    }
    assert choose_master(group, live) == ids[2]


def test_liveness_reset_gives_every_broker_a_fresh_timeout() -> None:
    liveness = Liveness()
    liveness.beat(Heartbeat("g", 1, "a:1", 1, 0, 0, 1000, 0, seen_ms=0))
    assert not liveness.is_alive("g", 1, 5000)
    liveness.reset(5000)
    assert liveness.is_alive("g", 1, 5500)
    assert not liveness.is_alive("g", 1, 6500)
