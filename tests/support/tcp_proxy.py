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
        self._lock = threading.Lock()
        self._closed = False
        self._sockets: list[socket.socket] = []
        self._acceptor = threading.Thread(target=self._accept, name="dropping-proxy", daemon=True)
        self._acceptor.start()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                if self._closed or self.drops_left > 0:
                    self.drops_left -= 0 if self._closed else 1
                    client.close()
                    continue
                try:
                    upstream = socket.create_connection(("127.0.0.1", self.target_port))
                except OSError:
                    client.close()
                    continue
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        """Stop accepting and close every connection (the pumps then end)."""
        with self._lock:
            self._closed = True
            try:
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
            except OSError:
                pass
            self._listener.close()
            sockets, self._sockets = self._sockets, []
        self._acceptor.join(5)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes one way until either side closes; the proxy's close() closes both sockets."""
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
