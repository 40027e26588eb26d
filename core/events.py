"""A tiny synchronous event emitter for the Qt-free models (the session, the mask document).

Models announce every change through an `Event`; views (Qt widgets, tests, a future web front end)
subscribe with `connect`. Callbacks run in the emitting thread, in connection order: the models are
changed from the GUI thread only, so Qt views can update directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Callback = Callable[..., Any]


class Event:
    """One kind of change; `emit(*args)` calls every connected callback with `args`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._callbacks: list[Callback] = []

    def connect(self, callback: Callback) -> Callback:
        """Subscribe `callback` (returned, so this works as a decorator)."""
        self._callbacks.append(callback)
        return callback

    def disconnect(self, callback: Callback) -> None:
        self._callbacks.remove(callback)

    def emit(self, *args: Any) -> None:
        for callback in list(self._callbacks):  # a callback may disconnect itself
            callback(*args)

    def __repr__(self) -> str:
        return f"Event({self.name!r}, {len(self._callbacks)} callbacks)"
