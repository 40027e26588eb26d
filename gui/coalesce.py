"""Drawing at a bounded rate, however fast the session changes: a view asks for a redraw on every event it
follows (`Coalescer.request`) and draws at most once per `interval_ms`, always once after the last request.

During Run all a result arrives every few milliseconds and each announces several changes; a view that
redrew the dataset's rows, means or histogram on each would spend the GUI thread on frames nobody sees. A
request after a quiet spell draws on the next pass of the event loop (never inside the emitting call, so a
view always draws a settled state); requests during a burst are taken by the one draw due at the end of the
interval. The view derives what it draws from the session when it draws, so nothing is lost in between.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

#: How often a view redraws at most while its data keeps changing: 10 frames a second.
REFRESH_MS = 100


class Coalescer(QObject):
    """Calls `draw()` at most once per `interval_ms`, at least once after the last `request()`."""

    def __init__(self, draw: Callable[[], object], interval_ms: int = REFRESH_MS,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._draw = draw
        self.interval = interval_ms / 1000
        self._last = -float("inf")  # time.monotonic() of the last draw
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.flush)

    @property
    def pending(self) -> bool:
        """Whether a draw is due (requested, not yet drawn)."""
        return self._timer.isActive()

    def request(self) -> None:
        """Something the view draws changed: draw soon (at once after a quiet spell, else at the interval's end)."""
        if not self._timer.isActive():
            wait = max(0.0, self._last + self.interval - time.monotonic())
            self._timer.start(round(wait * 1000))

    def flush(self) -> None:
        """Draw now (and drop the draw that was due)."""
        self._timer.stop()
        self._last = time.monotonic()
        self._draw()
