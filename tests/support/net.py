"""Ports on this machine's loopback, and a relay that can play a server that stops."""

from __future__ import annotations

import contextlib
import socket
import threading


def free_port() -> int:
    """Returns a TCP port on 127.0.0.1 that was free a moment ago (the caller binds it next)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Relay:
    """A TCP relay on 127.0.0.1 to `target` (host, port): a server's stand-in that can be stopped without
    stopping the server behind it. `close()` shuts the listener and every open connection, so a client sees
    what it would see of a stopped server (connections reset, then refused).

    >>> with Relay(("127.0.0.1", free_port())) as relay:
    ...     relay.url.startswith("http://127.0.0.1:")
    True
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="relay-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), name="relay-pump", daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:  # the other side or close() ended the connection
            pass

    def close(self) -> None:
        """Stops listening and resets every open connection."""
        with self._lock:
            self._closed = True
            sockets, self._open = self._open, []
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (a close alone does not)
        self._listener.close()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
