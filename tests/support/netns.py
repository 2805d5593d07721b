"""A private network namespace for tests that must use fixed ports another program may hold.

The README's commands name the default ports (9876, 10911, 8081). On a machine where another
``orbitmq standalone`` holds them, :class:`PrivateNetwork` gives the test a loopback of its own:
a holder process (``unshare --net``, loopback up) keeps the namespace alive; commands run in it
through ``nsenter``, and the test's own port probes run on a thread that has joined it
(``setns(2)`` moves only the calling thread), so the test process itself stays outside.

Creating a network namespace needs CAP_SYS_ADMIN (root, as on CI); :func:`available` says
whether this machine allows it. Nothing outside is reachable from inside: do anything that
needs the network (installs) before moving in.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

_CLONE_NEWNET = 0x40000000
_T = TypeVar("_T")


def available() -> bool:
    """True when this process may create a network namespace and enter it."""
    if shutil.which("unshare") is None or shutil.which("nsenter") is None or shutil.which("ip") is None:
        return False
    done = subprocess.run(
        ["unshare", "--net", "--", "ip", "link", "set", "lo", "up"], capture_output=True, timeout=30
    )
    return done.returncode == 0


class PrivateNetwork:
    """A network namespace with only a loopback, alive until :meth:`close`."""

    def __init__(self) -> None:
        self._holder = subprocess.Popen(
            ["unshare", "--net", "--", "sh", "-c", "ip link set lo up && echo ready && exec sleep infinity"],
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        assert self._holder.stdout is not None
        if self._holder.stdout.readline().strip() != b"ready":
            self._holder.kill()
            self._holder.wait(10)
            raise RuntimeError("could not create a network namespace (unshare --net)")
        self.path = f"/proc/{self._holder.pid}/ns/net"
        self._probes = ThreadPoolExecutor(max_workers=1, initializer=self._join)

    def _join(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns({self.path})")
        finally:
            os.close(fd)

    def argv(self, argv: list[str]) -> list[str]:
        """``argv`` as a command run inside the namespace."""
        return ["nsenter", f"--net={self.path}", "--", *argv]

    def call(self, probe: Callable[[], _T]) -> _T:
        """``probe()`` run on a thread inside the namespace (sockets it opens live there)."""
        return self._probes.submit(probe).result()

    def close(self) -> None:
        self._probes.shutdown(wait=True)
        if self._holder.poll() is None:
            self._holder.kill()
        self._holder.wait(10)
        if self._holder.stdout is not None:
            self._holder.stdout.close()
