"""Frame time of the Profile dock's timeline on 2000 operators (goal: >= 30 fps, i.e. <= 33 ms a frame).

Run: `python bench/bench_profile_dock.py` (a few seconds, offscreen). The timeline holds OPS kernels in each
of RUNS runs (6000 rectangles), as the dock shows a profile. Each frame changes the visible range — a
zoom step in or out, or a pan — then repaints the plot synchronously, which is what a wheel or drag event
costs; the figure is the median over FRAMES frames per gesture, with the process CPU time beside it.
"""

from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QApplication

from segscope.core.profiling.model import TimelineEvent
from segscope.gui.docks.profile_plots import TimelinePlot

OPS, RUNS, FRAMES = 2000, 3, 60
GOAL_MS = 1000 / 30


def events() -> list[TimelineEvent]:
    out = []
    types = ("Conv", "Relu", "Concat", "Transpose", "Resize", "Add")
    for lane in range(RUNS):
        t = 0.0
        for i in range(OPS):
            dur = 0.02 + (i * 37 % 100) / 200
            out.append(TimelineEvent(f"/model/block_{i // 10}/op_{i}", types[i % len(types)], t, dur, lane))
            t += dur + 0.005
    return out


def frame_ms(plot: TimelinePlot, ranges: list[tuple[float, float]]) -> tuple[float, float]:
    wall, cpu = [], []
    for low, high in ranges:
        w0, c0 = time.perf_counter(), time.process_time()
        plot.setXRange(low, high, padding=0)
        plot.viewport().repaint()
        wall.append((time.perf_counter() - w0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    app = QApplication.instance() or QApplication([])
    plot = TimelinePlot()
    plot.resize(1400, 420)
    plot.show()
    plot.set_events(events())
    app.processEvents()
    end = plot.item.boundingRect().right()  # type: ignore[union-attr]
    centre = end / 2
    zoom = [(centre - end / 2 * 0.9**k, centre + end / 2 * 0.9**k) for k in range(FRAMES)]
    gestures = {
        "zoom in (whole run -> 0.2 %)": zoom,
        "zoom out": zoom[::-1],
        "pan at 5 % width": [(end * k / FRAMES * 0.9, end * k / FRAMES * 0.9 + end * 0.05) for k in range(FRAMES)],
        "pan over the whole run": [(0 - k % 2, end + k % 2) for k in range(FRAMES)],
    }
    frame_ms(plot, zoom[:5])  # warm-up
    print(f"timeline: {OPS} ops x {RUNS} runs = {len(plot.item.events)} kernels, "  # type: ignore[union-attr]
          f"one batched item, {plot.width()}x{plot.height()} px; load {os.getloadavg()[0]:.2f}")
    worst = 0.0
    for name, ranges in gestures.items():
        wall, cpu = frame_ms(plot, ranges)
        worst = max(worst, wall)
        print(f"  {name:<30} {wall:6.2f} ms/frame wall ({1000 / wall:5.0f} fps), {cpu:6.2f} ms CPU")
    print(f"worst gesture {worst:.2f} ms/frame: {'meets' if worst <= GOAL_MS else 'MISSES'} the "
          f"{GOAL_MS:.1f} ms (30 fps) goal")


if __name__ == "__main__":
    main()
