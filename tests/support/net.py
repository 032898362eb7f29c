"""Ports on this machine's loopback."""

from __future__ import annotations

import socket


def free_port() -> int:
    """Returns a TCP port on 127.0.0.1 that was free a moment ago (the caller binds it next)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
