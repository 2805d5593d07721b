"""One process per store directory: the lock a store takes on open and drops on close."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orbitmq.errors import StoreLockedError
from orbitmq.store.dir_lock import lock_store_dir
from orbitmq.store.message_store import MessageStore
from tests.unit.store.conftest import OpenStore, tiny_config


def test_store_open_refuses_a_directory_another_store_holds(open_store: OpenStore, store_root: Path) -> None:
    open_store()
    second = MessageStore(tiny_config(store_root))
    with pytest.raises(StoreLockedError, match=f"{store_root} is in use by process {os.getpid()}") as refused:
        second.open()
    assert refused.value.pid == os.getpid() and refused.value.directory == str(store_root)
    assert not second.is_open and (store_root / "abort").exists()


def test_store_close_lets_the_next_process_open_the_directory(
    open_store: OpenStore, store_root: Path
) -> None:
    open_store().close()
    lock = lock_store_dir(store_root)
    lock.release()


def test_store_lock_names_the_process_holding_it_and_dies_with_it(tmp_path: Path) -> None:
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from orbitmq.store.dir_lock import lock_store_dir; "
            "lock_store_dir(sys.argv[1]); print('locked', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
            with pytest.raises(StoreLockedError, match=f"in use by process {holder.pid}"):
                lock_store_dir(tmp_path)
        finally:
            holder.kill()
    # A killed holder leaves the file, not the lock.
    lock_store_dir(tmp_path).release()
