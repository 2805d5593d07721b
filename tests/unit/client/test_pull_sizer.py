"""PullSizer: how many messages a consumer's next pull asks for (maxMsgNums)."""

from __future__ import annotations

from orbitmq.client._pull_api import ADAPTIVE_PULL_MSG_NUMS_MAX, PullResult, PullSizer, PullStatus


def answer(status: PullStatus, next_begin_offset: int, max_offset: int) -> PullResult:
    return PullResult(status, next_begin_offset, 0, max_offset)


def test_pull_sizer_asks_pull_batch_size_until_a_backlog_shows() -> None:
    sizer = PullSizer(32)
    assert sizer.next_size(room=1000) == 32
    sizer.on_result(answer(PullStatus.FOUND, 32, 32))  # caught up
    assert sizer.next_size(room=1000) == 32
    assert not sizer.worth_waiting(room=100, threshold=1000)


def test_pull_sizer_asks_for_the_backlog_within_the_room_and_the_cap() -> None:
    sizer = PullSizer(32)
    sizer.on_result(answer(PullStatus.FOUND, 32, 532))
    assert sizer.next_size(room=1000) == 500  # the backlog
    assert sizer.next_size(room=300) == 300  # the flow-control room
    assert sizer.next_size(room=10) == 32  # never below pull_batch_size
    sizer.on_result(answer(PullStatus.FOUND, 100, 1_000_000))
    assert sizer.next_size(room=1_000_000) == ADAPTIVE_PULL_MSG_NUMS_MAX


def test_pull_sizer_filtered_backlog_counts_and_head_answers_reset() -> None:
    sizer = PullSizer(32)
    sizer.on_result(answer(PullStatus.NO_MATCHED_MSG, 100, 900))  # all filtered, more behind
    assert sizer.next_size(room=1000) == 800
    sizer.on_result(answer(PullStatus.NO_NEW_MSG, 900, 900))
    assert sizer.next_size(room=1000) == 32
    sizer.on_result(answer(PullStatus.FOUND, 32, 2000))
    sizer.on_result(answer(PullStatus.OFFSET_ILLEGAL, 0, 2000))
    assert sizer.next_size(room=1000) == 32


def test_pull_sizer_waits_for_half_the_threshold_only_with_a_bigger_backlog() -> None:
    sizer = PullSizer(32)
    sizer.on_result(answer(PullStatus.FOUND, 0, 5000))
    assert sizer.worth_waiting(room=400, threshold=1000)
    assert not sizer.worth_waiting(room=500, threshold=1000)
    sizer.on_result(answer(PullStatus.FOUND, 4800, 5000))  # 200 left: a pull of 200 takes it all
    assert not sizer.worth_waiting(room=400, threshold=1000)
