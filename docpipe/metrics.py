"""The old home of the library's event emitter, kept so that ``from docpipe.metrics import emit`` still works
while the modules that use it move to `docpipe.events` (this module goes once none does). The Prometheus
`Metrics` class moved to `docpipe.server.metrics`.
"""

from __future__ import annotations

from docpipe.events import Listener, add_listener, emit, remove_listener

__all__ = ["Listener", "add_listener", "emit", "remove_listener"]
