"""Viewer timings: first paint of a slide, frame times while dragging the ROI and panning, result to panels.

    python bench/bench_gui.py [--runs 5] [--big 16384] [--skip-big]

- first paint: from the slide's file path to the slide view painted: open it (core.slides: a PNG is decoded
  whole), read its coarsest level, hand it to the view and paint it once; for a 4000x3000 and a 16k x 16k slide.
- frame time: one ROI drag step (move the rectangle, sync the x0/y0/x1/y1 fields) or one pan step, each
  followed by a synchronous repaint of the view, at "fit" zoom and at 1:1 (where the detail layer shows).
- result to panels: from an `ImageEvaluation` arriving in the window (960x960 result, 1800x1800 ROI) to the
  table, metrics, histogram and the three result panels updated, painted.

Medians over `--runs` (first paint) or 60 steps (frames). Runs offscreen (Qt's raster painter, no GPU).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import cv2
import numpy as np
from PySide6.QtWidgets import QApplication

from segscope.core.dataset.dataset import Dataset
from segscope.core.evaluate import ImageEvaluation
from segscope.core.files.fileio import read_mask, write_image
from segscope.core.metrics.scores import image_metrics
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.slides import open_slide
from segscope.gui.canvas.slide_view import SlideView
from segscope.gui.runtime.jobs import Jobs
from segscope.gui.runtime.slide_loader import read_base
from segscope.gui.shell.main_window import MainWindow


def synthetic_slide(width: int, height: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A textured gray slide with dark blobs, and its mask; built at 1/8 size and upsampled (fast for 16k)."""
    rng = np.random.default_rng(seed)
    small = cv2.GaussianBlur(rng.normal(150, 25, (height // 8, width // 8)).astype(np.float32), (0, 0), 3)
    gray = cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)
    mask = np.zeros((height, width), np.uint8)
    for _ in range(12):
        centre = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        cv2.circle(mask, centre, int(rng.integers(20, max(21, width // 40))), 255, -1)
    gray[mask > 0] *= 0.4
    image = cv2.cvtColor(np.clip(gray, 0, 255).astype(np.uint8), cv2.COLOR_GRAY2BGR)
    return image, mask


def median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:8.1f} ms"


def first_paint(app: QApplication, path: Path, runs: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"open": [], "base level": [], "show + paint": [], "total": []}
    for _ in range(runs):
        jobs = Jobs()
        view = SlideView(jobs)
        view.resize(1200, 800)
        view.show()
        app.processEvents()
        t0 = time.perf_counter()
        reader = open_slide(path)
        t1 = time.perf_counter()
        base = read_base(reader)
        t2 = time.perf_counter()
        width, height = reader.size
        view.set_reader(reader, base, Roi(width // 4, height // 4, width // 2, height // 2))
        view.view.viewport().repaint()
        t3 = time.perf_counter()
        for key, value in zip(timings, (t1 - t0, t2 - t1, t3 - t2, t3 - t0)):
            timings[key].append(value)
        view.shutdown()
        jobs.shutdown()
        view.close()
        del view, reader, base
        app.processEvents()
    return timings


def frame_times(app: QApplication, view: SlideView, steps: int = 60) -> dict[str, list[float]]:
    """Per-frame cost of dragging the ROI and of panning, at fit and at 1:1 zoom."""
    out: dict[str, list[float]] = {}
    for zoom in ("fit", "1:1"):
        view.fit()
        roi = view.roi()
        if zoom == "1:1":
            view.vb.setRange(xRange=(roi.x0, roi.x0 + 1200), yRange=(roi.y0, roi.y0 + 800), padding=0)
            view.one_to_one()
        app.processEvents()
        view._update_detail()
        drag = []
        for i in range(steps):
            t0 = time.perf_counter()
            dx = 2 if (i // 20) % 2 == 0 else -2
            view.roi_item.setPos(view.roi_item.pos() + type(view.roi_item.pos())(dx, dx))  # what a drag step does
            view.view.viewport().repaint()
            drag.append(time.perf_counter() - t0)
        out[f"ROI drag step ({zoom})"] = drag
        pan = []
        for i in range(steps):
            t0 = time.perf_counter()
            step = 15 if (i // 20) % 2 == 0 else -15
            px, _ = view.vb.viewPixelSize()
            view.vb.translateBy(x=step * px, y=step * px)
            view._update_detail()  # the debounced detail refresh, counted in every frame (worst case)
            view.view.viewport().repaint()
            pan.append(time.perf_counter() - t0)
        out[f"pan step ({zoom})"] = pan
        view.set_roi(roi)
    return out


def result_to_panels(app: QApplication, dataset_dir: Path, runs: int) -> list[float]:
    window = MainWindow()
    window.resize(1600, 1000)
    window.show()
    assert window.commands.open_dataset(dataset_dir)
    end = time.monotonic() + 120
    while not window.slide_ready() and time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)
    dataset: Dataset = window.dataset
    item = dataset.items[0]
    roi = Roi(1100, 600, 2900, 2400)
    mask = read_mask(item.mask_path)
    rng = np.random.default_rng(1)
    samples = []
    for _ in range(runs):
        logits = rng.normal(size=(960, 960)).astype(np.float32)
        p1 = 1 / (1 + np.exp(-logits))
        probabilities = np.stack([1 - p1, p1], axis=-1).astype(np.float32)
        result = InferenceResult(probabilities, (p1 > 0.5).astype(np.uint8), roi, (4000, 3000), {"infer": 0.1})
        evaluation = ImageEvaluation(item, result, image_metrics(result, mask))
        t0 = time.perf_counter()
        window._on_evaluated(evaluation)
        window.repaint()
        samples.append(time.perf_counter() - t0)
    window.close()
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--big", type=int, default=16384, help="side of the big square slide")
    parser.add_argument("--skip-big", action="store_true")
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(["bench_gui"])
    with tempfile.TemporaryDirectory(prefix="segscope-bench-gui-") as tmp:
        tmp_dir = Path(tmp)
        sizes = [(4000, 3000)] + ([] if args.skip_big else [(args.big, args.big)])
        for width, height in sizes:
            image, mask = synthetic_slide(width, height)
            path = write_image(tmp_dir / f"{width}x{height}" / "image.png", image)
            write_image(path.with_name("mask.png"), mask)
            del image, mask
            print(f"\nslide {width} x {height} ({path.stat().st_size / 1e6:.0f} MB PNG)")
            runs = args.runs if width <= 4000 else max(1, args.runs // 2)
            for stage, samples in first_paint(app, path, runs).items():
                print(f"  first paint, {stage:14s} {median_ms(samples)}")
            jobs = Jobs()
            view = SlideView(jobs)
            view.resize(1200, 800)
            view.show()
            reader = open_slide(path)
            roi = Roi(width // 3, height // 3, width // 3 + 1800, height // 3 + 1800)
            view.set_reader(reader, read_base(reader), roi)
            app.processEvents()
            for name, samples in frame_times(app, view).items():
                fps = 1 / statistics.median(samples)
                print(f"  frame, {name:22s} {median_ms(samples)}  ({fps:5.0f} fps)")
            view.shutdown()
            jobs.shutdown()
            view.close()
            del view, reader
        samples = result_to_panels(app, tmp_dir, args.runs * 2)
        print(f"\nresult (960x960, ROI 1800x1800) to window updated: {median_ms(samples)} (goal <= 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
