"""Drawing at a bounded rate, however fast the session changes: a view asks for a redraw on every event it
follows (`Coalescer.request`) and draws at most once per `interval_ms`, always once after the last request,
and never spends more than `BUDGET` of the GUI thread's time drawing.

During Run all a result arrives every few milliseconds and each announces several changes; a view that
redrew the dataset's rows, means or histogram on each would spend the GUI thread on frames nobody sees. A
request after a quiet spell draws on the next pass of the event loop (never inside the emitting call, so a
view always draws a settled state); requests during a burst are taken by the one draw due at the end of the
interval. The view derives what it draws from the session when it draws, so nothing is lost in between.

A draw that reads every image (the histogram of 10,000 values) costs more as the dataset grows: at a fixed rate
its share of a run's GUI time would grow with it. So the next draw also waits until the last one's time is at
most `BUDGET` of the time since it started: a 40 ms draw runs at most every 400 ms.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

#: How often a view redraws at most while its data keeps changing: 10 frames a second.
REFRESH_MS = 100
#: The share of the GUI thread's time one view's draws may take while its data keeps changing.
BUDGET = 0.1


class Coalescer(QObject):
    """Calls `draw()` at most once per `interval_ms` (and per ten times its last draw's time), at least once after
    the last `request()`."""

    def __init__(self, draw: Callable[[], object], interval_ms: int = REFRESH_MS,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._draw = draw
        self.interval = interval_ms / 1000
        self._next = 0.0  # time.monotonic() before which no draw starts
        self._due = False  # (kept here: asking the timer is a call into Qt, which may wait for the GIL)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.flush)

    @property
    def pending(self) -> bool:
        """Whether a draw is due (requested, not yet drawn)."""
        return self._due

    def request(self) -> None:
        """Something the view draws changed: draw soon (at once after a quiet spell, else at the interval's end)."""
        if not self._due:
            self._due = True
            wait = max(0.0, self._next - time.monotonic())
            self._timer.start(round(wait * 1000))

    def flush(self) -> None:
        """Draw now (and drop the draw that was due)."""
        self._timer.stop()
        self._due = False
        began = time.monotonic()
        self._draw()
        self._next = began + max(self.interval, (time.monotonic() - began) / BUDGET)
