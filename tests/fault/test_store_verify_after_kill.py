"""The verifier run right after a SIGKILL says the store needs recovery, and checks what recovery keeps.

Method: a store_writer.py child puts messages under SYNC_FLUSH until it is SIGKILLed (its
consume-queue write-out and index queue are then behind the log, as after any crash; it
moves its checkpoint often, so the index has files whose end the log has passed). The
verifier must exit 3 ("needs recovery") on that store, naming the tail left to recovery
instead of reporting the keys and entries not yet written as problems; after one open
(crash recovery) and a clean close the same store verifies clean (exit 0).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fault.store_writer import INDEX_ENTRIES, INDEX_HASH_SLOTS
from tests.fault.test_store_crash import QUEUE_ENTRIES, READY_TIMEOUT_S, SEGMENT_BYTES, Writer, open_store

pytestmark = pytest.mark.fault


def _verify(directory: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "orbitmq.store.verify", str(directory)]
    command += ["--segment-bytes", str(SEGMENT_BYTES), "--queue-entries-per-file", str(QUEUE_ENTRIES)]
    command += ["--index-slots", str(INDEX_HASH_SLOTS), "--index-entries", str(INDEX_ENTRIES)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_store_verify_after_sigkill_says_recovery_is_needed(tmp_path: Path) -> None:
    directory = tmp_path / "store"
    # A checkpoint (and index flush) every 300 ms: the index has files, and a tail after them.
    writer = Writer(directory, 28, tmp_path / "writer.log", ["--thorough-flush-ms", "300"])
    try:
        assert writer.ready.wait(READY_TIMEOUT_S), (tmp_path / "writer.log").read_text()
        deadline = time.monotonic() + 20
        # Past the 1 s consume-queue write-out, and keys queued for the index, before the kill.
        while len(writer.lines) < 400 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.2)
    finally:
        writer.kill()
    assert len(writer.acks()) > 100, "the writer acknowledged too little for the test to mean anything"
    assert (directory / "abort").exists()
    killed = _verify(directory)
    output = killed.stdout + killed.stderr
    assert killed.returncode == 3, output
    assert "needs recovery: abort marker present" in output, output
    assert "to be re-dispatched by recovery" in output and "index keys (indexed)" in output, output
    assert "is not indexed" not in output and "is missing" not in output, output
    store = open_store(directory)
    store.close()
    recovered = _verify(directory)
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
