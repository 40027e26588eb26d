"""An in-process event-loop heartbeat: how late the GUI thread handles a queued signal posted every 20 ms.

A thread of its own posts a queued signal to an object living in the GUI thread every `period` seconds, each
carrying the time it was due; the slot records `handled - due`. A GUI thread that is busy for 2 s handles the
beats that piled up afterwards, the first of them 2 s late: the maximum lateness is the longest stall, the
99th percentile how often the window stutters. Beats are due on a fixed schedule, so a posting thread
delayed by the GIL does not hide a stall.

With `stacks`, a watchdog records the GUI thread's Python stack whenever no beat was handled for
`stall_s`, so a stall names the code that caused it (`stall_report`).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, Signal


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

    def __init__(self, period: float = 0.020, stacks: bool = False, stall_s: float = 0.15) -> None:
        super().__init__()
        self.period, self.stall_s = period, stall_s
        self._beat.connect(self._on_beat, Qt.ConnectionType.QueuedConnection)
        self._lateness: list[float] = []
        self._last_handled = time.perf_counter()
        self._stop = threading.Event()
        self._gui_thread = threading.get_ident()
        self._stacks = stacks
        self.stalls: Counter[str] = Counter()  # innermost project frames -> watchdog hits (stall_s each)
        self._threads = [threading.Thread(target=self._post, name="heartbeat", daemon=True)]
        if stacks:
            self._threads.append(threading.Thread(target=self._watch, name="heartbeat-watchdog", daemon=True))

    def start(self) -> None:
        self._last_handled = time.perf_counter()
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()

    def take(self) -> list[float]:
        values, self._lateness = self._lateness, []
        return values

    def _on_beat(self, due: float) -> None:
        now = time.perf_counter()
        self._last_handled = now
        self._lateness.append(max(0.0, now - due))

    def _post(self) -> None:
        due = time.perf_counter()
        while not self._stop.is_set():
            due += self.period
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            self._beat.emit(due)

    def _watch(self) -> None:
        while not self._stop.wait(self.stall_s / 3):
            if time.perf_counter() - self._last_handled < self.stall_s:
                continue
            frame = sys._current_frames().get(self._gui_thread)
            if frame is None:
                continue
            frames = traceback.extract_stack(frame)[-5:]  # innermost last: the project's and pyqtgraph's
            where = " <- ".join(f"{f.filename.rsplit('/', 2)[-2]}/{f.filename.rsplit('/', 1)[-1]}:{f.lineno} "
                                f"{f.name}" for f in reversed(frames))
            self.stalls[where or "(no Python frame)"] += 1

    def stall_report(self, top: int = 8) -> list[str]:
        """The GUI thread's most frequent places while it stalled, with the seconds seen there."""
        return [f"    {n * self.stall_s / 3:6.2f} s  {where}" for where, n in self.stalls.most_common(top)]


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else 0.0
