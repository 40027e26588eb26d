"""An in-process event-loop heartbeat: how late the GUI thread handles a queued signal posted every 20 ms.

A thread of its own posts a queued signal to an object living in the GUI thread every `period` seconds, each
carrying the time it was due; the slot records `handled - due`. A GUI thread that is busy for 2 s handles the
beats that piled up afterwards, the first of them 2 s late: the maximum lateness is the longest stall, the
99th percentile how often the window stutters. Beats are due on a fixed schedule, so a posting thread
delayed by the GIL does not hide a stall; but a posting thread starved of the GIL while the GUI thread runs
counts as a stall too.

`TimerHeartbeat` is the GUI thread's own beat: a precise timer of that thread, whose fires Qt dispatches as it
dispatches the user's input. A GUI thread that is busy, or waits for the GIL, delays it; no other thread takes
part, so another thread's wait for the GIL is not counted. Benchmarks print both.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, QTimer, Signal


@dataclass(frozen=True)
class Lateness:
    """Beats handled during one action: their count, the 99th percentile and the maximum lateness (s)."""

    beats: int
    p99: float
    max: float

    def line(self, name: str, budget: tuple[float, float] = (0.100, 0.250)) -> str:
        verdict = "ok" if self.p99 <= budget[0] and self.max <= budget[1] else "OVER BUDGET"
        return (f"  {name:<34} p99 {self.p99 * 1000:7.1f} ms   max {self.max * 1000:7.1f} ms   "
                f"({self.beats} beats)  {verdict}")


def summarize(values: list[float]) -> Lateness:
    if not values:
        return Lateness(0, 0.0, 0.0)
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return Lateness(len(values), p99, ordered[-1])


class Heartbeat(QObject):
    """Create in the GUI thread; `start()`, then `take()` the lateness of the beats handled since the last take."""

    _beat = Signal(float)

    def __init__(self, period: float = 0.020) -> None:
        super().__init__()
        self.period = period
        self._beat.connect(self._on_beat, Qt.ConnectionType.QueuedConnection)
        self._lateness: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._post, name="heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def take(self) -> list[float]:
        values, self._lateness = self._lateness, []
        return values

    def _on_beat(self, due: float) -> None:
        self._lateness.append(max(0.0, time.perf_counter() - due))

    def _post(self) -> None:
        due = time.perf_counter()
        while not self._stop.is_set():
            due += self.period
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            self._beat.emit(due)


class TimerHeartbeat(QObject):
    """Create in the GUI thread; `start()`, then `take()` the lateness of the beats due since the last take, counted
    as `Heartbeat` counts them: a gap of g between two fires of the `period` timer makes the beats due in it late by
    g - period, g - 2 period, ..., down to 0."""

    def __init__(self, period: float = 0.020) -> None:
        super().__init__()
        self.period = period
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(round(period * 1000))
        self._timer.timeout.connect(self._fired)
        self._last = 0.0
        self._lateness: list[float] = []

    def start(self) -> None:
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def take(self) -> list[float]:
        values, self._lateness = self._lateness, []
        return values

    def _fired(self) -> None:
        now = time.perf_counter()
        late = now - self._last - self.period
        self._last = now
        self._lateness.append(max(0.0, late))
        while late > self.period:
            late -= self.period
            self._lateness.append(late)

