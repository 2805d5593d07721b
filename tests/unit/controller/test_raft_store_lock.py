"""A controller's Raft store is one controller's: a second one on the directory is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orbitmq.controller.consensus import RaftLog
from orbitmq.errors import StoreLockedError
from orbitmq.store.dir_lock import lock_store_dir


def test_controller_refuses_a_store_directory_another_controller_holds(tmp_path: Path) -> None:
    held = lock_store_dir(tmp_path, "controller store")  # what a running controller holds
    try:
        with pytest.raises(StoreLockedError, match=f"{tmp_path} is in use by process {os.getpid()}"):
            RaftLog("127.0.0.1:1", [], tmp_path)
        assert not (tmp_path / "raft.journal").exists()
    finally:
        held.release()
