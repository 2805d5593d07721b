"""A TCP forwarder on 127.0.0.1 that drops its first connections: a server that is briefly away.

``DroppingProxy(target_port, drop_first=N)`` accepts on a free port; the first ``N``
connections are closed at once (the client sees the connection close mid-request), later ones
are forwarded byte for byte to ``127.0.0.1:target_port``. Threads only; ``close()`` stops it.
"""

from __future__ import annotations

import socket
import threading


class DroppingProxy:
    def __init__(self, target_port: int, drop_first: int) -> None:
        self.target_port = target_port
        self.drops_left = drop_first
        self.accepted = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="dropping-proxy", daemon=True).start()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.accepted += 1
            if self.drops_left > 0:
                self.drops_left -= 1
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
