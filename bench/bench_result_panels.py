"""Time from an InferenceResult to the three result panels painted (goal: <= 50 ms for 960x960).

Run: `python bench/bench_result_panels.py` (a few seconds, offscreen). Each figure is the median over
REPEATS runs of `show_result` followed by a synchronous repaint of the panels (so pyqtgraph really turns
the arrays into pixels), alternating two different results so nothing is served from a cache. The ROI is
the original script's 1800x1800 box; the ground truth and error map are at ROI resolution.

Wall time is what the user waits; on a busy machine it includes waiting for a core, so the process CPU
time (all threads; OpenCV may use several) and the load average are printed beside it.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import cv2
import numpy as np
from PySide6.QtWidgets import QApplication

from segscope.core.result import InferenceResult
from segscope.core.roi import ORIGINAL_DEFAULT_ROI, Roi
from segscope.gui.canvas.result_panels import ResultPanels

REPEATS = 21
GOAL_MS = 50.0
MODEL_SIZE = 960


def make_inputs(seed: int) -> tuple[InferenceResult, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    roi = Roi(*ORIGINAL_DEFAULT_ROI)
    logit = cv2.resize(rng.normal(0, 4, (16, 16)).astype(np.float32), (MODEL_SIZE, MODEL_SIZE))
    p1 = 1 / (1 + np.exp(-logit))
    probabilities = np.stack([1 - p1, p1], axis=-1).astype(np.float32)
    result = InferenceResult(probabilities, (p1 > 0.5).astype(np.uint8), roi, (4000, 3000))
    image = rng.integers(0, 256, (roi.height, roi.width, 3), dtype=np.uint8)
    truth = (cv2.resize(p1, (roi.width, roi.height)) > 0.45).astype(np.uint8) * 255
    return result, image, truth


def median_ms(step: Callable[[int], None]) -> tuple[float, float]:
    """Median wall and process-CPU milliseconds of `step`."""
    step(0)  # warm-up
    wall, cpu = [], []
    for i in range(REPEATS):
        start, start_cpu = time.perf_counter(), time.process_time()
        step(i + 1)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return 1000 * statistics.median(wall), 1000 * statistics.median(cpu)


def main() -> int:
    app = QApplication.instance() or QApplication(sys.argv)
    panels = ResultPanels()
    panels.resize(1500, 600)
    panels.show()
    app.processEvents()
    inputs = [make_inputs(0), make_inputs(1)]

    def show(i: int) -> None:
        panels.show_result(*inputs[i % 2])
        panels.graphics.viewport().repaint()

    def switch_class(i: int) -> None:
        panels.class_combo.setCurrentIndex(i % 2)
        panels.graphics.viewport().repaint()

    def drag_levels(i: int) -> None:
        panels.set_levels(0.01 * (i % 40), 1.0 - 0.01 * (i % 40))
        panels.graphics.viewport().repaint()

    rows = [("result -> panels painted (plain)", median_ms(show))]
    panels.error_map_action.setChecked(True)
    rows.append(("result -> panels painted (error map)", median_ms(show)))
    panels.overlay_action.setChecked(True)
    rows.append(("result -> panels painted (error map + overlay)", median_ms(show)))
    panels.contour_action.setChecked(True)
    rows.append(("result -> panels painted (error map + contours)", median_ms(show)))
    panels.contour_action.setChecked(False)
    panels.overlay_action.setChecked(False)
    rows.append(("class switch -> painted", median_ms(switch_class)))
    rows.append(("colour-bar level change -> painted", median_ms(drag_levels)))

    print(f"ResultPanels, {MODEL_SIZE}x{MODEL_SIZE} result, 1800x1800 ROI, median of {REPEATS} runs "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):")
    print(f"  {'':<50} {'wall':>10} {'CPU':>10}")
    for name, (wall, cpu) in rows:
        print(f"  {name:<50} {wall:7.1f} ms {cpu:7.1f} ms")
    worst = max(wall for name, (wall, _) in rows if name.startswith("result"))
    verdict = "meets" if worst <= GOAL_MS else "MISSES"
    print(f"slowest result -> panels: {worst:.1f} ms, {verdict} the {GOAL_MS:.0f} ms goal "
          f"({worst / GOAL_MS:.2f} of the budget)")
    return 0 if worst <= GOAL_MS else 1


if __name__ == "__main__":
    sys.exit(main())
