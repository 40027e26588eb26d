"""One draw of the Metrics dock's histogram over N images, as a Run all draws it (issue 39): the GUI thread's CPU
(`time.thread_time()`) from asking the session's running summary for the ranking metric's values to the plot
repainted (the layout and the paint the draw asked for, handled by the event loop).

    python bench/bench_histogram_draw.py [--sizes 2000,10000] [--draws 40] [--between 50]

Per N: a `RunningSummary` holding N images' metrics (foreground Dice drawn from Beta(8, 2), one image in 20
n/a) and a `MetricsPanel` on screen (offscreen, 320x420); before each draw `--between` images get new metrics
(untimed), as between two draws of a Run all (the histogram draws at most twice a second; the bench's tiny
model scores ~100-200 images a second). Sizes are interleaved draw by draw. Prints the median CPU of one draw
with its spread, and the plot's paints per draw. It uses only what the window's draw uses
(`RunningSummary.values`, `MetricsPanel.set_dataset_values`): run it at another commit to compare."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

import numpy as np  # noqa: E402
from PySide6.QtCore import QEvent, QObject  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402
from timing import spread  # noqa: E402

from segscope.core.metrics import catalogue  # noqa: E402
from segscope.core.metrics.running import RunningSummary  # noqa: E402
from segscope.core.metrics.scores import ImageMetrics  # noqa: E402
from segscope.core.profiling.machine import cpu_name  # noqa: E402
from segscope.gui.docks.metrics_panel import MetricsPanel  # noqa: E402


class PaintCount(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, _watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        self.count += event.type() == QEvent.Type.Paint
        return False


class Histogram:
    """A panel and the summary it draws from, N images in it."""

    def __init__(self, app: QApplication, size: int, between: int, rng: np.random.Generator) -> None:
        self.app, self.rng, self.size, self.between = app, rng, size, between
        self.panel = MetricsPanel()
        self.panel.resize(320, 420)
        self.panel.show()
        self.paints = PaintCount()
        self.panel.plot.viewport().installEventFilter(self.paints)
        self.running = RunningSummary()
        self.metric = catalogue.lookup("foreground_dice")
        for n in range(size):
            self.running.set(f"img{n}", self.metrics())
        self.next = 0
        self.draw()

    def metrics(self) -> ImageMetrics:
        dice = float(self.rng.beta(8, 2)) if self.rng.random() > 0.05 else float("nan")
        return ImageMetrics(dice, dice, (1.0, dice), (1.0, dice), dice, dice, 1.0, 1.0, None)

    def draw(self) -> None:
        running = self.running
        self.panel.set_dataset_values(self.metric, running.values(self.metric), running.aggregate(self.metric))
        self.app.processEvents()  # (the layout, then the repaint the draw asked for)

    def timed_draw(self) -> tuple[float, int]:
        """Some images scored anew (outside the timing), then one draw: its CPU seconds and the plot's paints."""
        for _ in range(self.between):
            self.running.set(f"img{self.next % self.size}", self.metrics())
            self.next += 1
        self.paints.count = 0
        began = time.thread_time()
        self.draw()
        return time.thread_time() - began, self.paints.count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,10000")
    parser.add_argument("--draws", type=int, default=40)
    parser.add_argument("--between", type=int, default=50, help="images scored anew between two draws")
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication([])
    rng = np.random.default_rng(0)
    benches = [Histogram(app, int(size), args.between, rng) for size in args.sizes.split(",")]
    cpu: dict[int, list[float]] = {bench.size: [] for bench in benches}
    paints: dict[int, list[int]] = {bench.size: [] for bench in benches}
    for _ in range(args.draws):
        for bench in benches:
            seconds, painted = bench.timed_draw()
            cpu[bench.size].append(seconds)
            paints[bench.size].append(painted)
    print(f"CPU: {cpu_name()}")
    for size, times in cpu.items():
        print(f"N = {size:>7,}: one histogram draw {spread(times, 1000, 'ms CPU')}; "
              f"plot paints per draw {np.mean(paints[size]):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
