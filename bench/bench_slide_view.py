"""The slide view on a big pyramidal TIFF: open time, pan/zoom frame times, tile latency, memory.

    python bench/bench_slide_view.py [--size 100000] [--path slide.tif] [--steps 120]

- open: from the file path to the view painted once: `open_slide` (the tifffile reader: the file's index
  only), read the coarsest level, hand it to the view, one synchronous repaint. Then the time until every
  tile the fitted view wants has arrived (read on the tile threads) and is painted.
- frame time: one pan step (15 screen px) or one zoom step (x1.1 about the centre), each followed by the
  view's tile update and a synchronous repaint, at 1:1 in tissue; tiles keep arriving in the background, so
  a frame never waits for a read. p50 / p95 over `--steps` steps, and how long after the last step the
  wanted tiles were all shown.
- memory: the process's peak RSS (ru_maxrss) and its RSS at the end, with the tile cache's bytes.

Runs offscreen (Qt's raster painter, no GPU). The slide is generated once (core.slides.synthetic) into a
temporary folder unless `--path` names one.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QApplication

from segscope.core.roi import Roi
from segscope.core.slides import open_slide
from segscope.core.slides.synthetic import write_pyramidal_tiff
from segscope.gui.canvas.slide_view import SlideView
from segscope.gui.runtime.jobs import Jobs
from segscope.gui.runtime.slide_loader import read_base


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return kb / 1024


def wait_tiles(app: QApplication, view: SlideView, timeout: float = 60.0) -> float:
    """Seconds until every wanted tile is shown (events processed meanwhile)."""
    t0 = time.perf_counter()
    while not set(view.tiles.wanted) <= set(view.tiles.shown):
        app.processEvents()
        time.sleep(0.001)
        if time.perf_counter() - t0 > timeout:
            raise SystemExit("tiles did not arrive within a minute")
    view.view.viewport().repaint()
    return time.perf_counter() - t0


def steps_ms(samples: list[float]) -> str:
    q = statistics.quantiles(samples, n=20)
    return f"p50 {statistics.median(samples) * 1000:6.1f} ms  p95 {q[18] * 1000:6.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="side of the generated slide (px)")
    parser.add_argument("--path", type=Path, help="an existing pyramidal TIFF instead of a generated one")
    parser.add_argument("--steps", type=int, default=120)
    args = parser.parse_args()
    app = QApplication.instance() or QApplication(sys.argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.path
        if path is None:
            t0 = time.perf_counter()
            path = write_pyramidal_tiff(Path(tmp) / "slide.tif", (args.size, args.size), tile=512)
            print(f"generated {path.stat().st_size / 1e6:.0f} MB pyramidal TIFF {args.size} x {args.size} "
                  f"in {time.perf_counter() - t0:.0f} s")
        rss_before = rss_mb()
        jobs = Jobs()
        view = SlideView(jobs)
        view.resize(1280, 800)
        view.show()
        app.processEvents()

        t0 = time.perf_counter()
        reader = open_slide(path)
        base = read_base(reader)
        width, height = reader.size
        view.set_reader(reader, base, Roi(width // 2, height // 2, width // 2 + 1800, height // 2 + 1800))
        view.view.viewport().repaint()
        opened = time.perf_counter() - t0
        view._update_detail()
        fitted = wait_tiles(app, view)
        print(f"{reader.kind} reader, {len(reader.levels)} levels, view 1280 x 800")
        print(f"open to first paint          {opened * 1000:8.1f} ms  (goal < 2000 ms)")
        print(f"fitted view's tiles shown    {fitted * 1000:8.1f} ms later")

        view.vb.setRange(QRectF(width * 0.45, height * 0.45, 1280, 800), padding=0)
        view.one_to_one()
        view._update_detail()
        wait_tiles(app, view)
        for name, step in (("pan 15 px", "pan"), ("zoom x1.1", "zoom")):
            frames = []
            for i in range(args.steps):
                t1 = time.perf_counter()
                sign = 1 if (i // (args.steps // 4)) % 2 == 0 else -1
                if step == "pan":
                    px, _ = view.vb.viewPixelSize()
                    view.vb.translateBy(x=15 * px, y=8 * px)
                else:
                    view.vb.scaleBy(s=(1.1 ** sign, 1.1 ** sign), center=view.vb.viewRect().center())
                view._update_detail()
                view.view.viewport().repaint()
                app.processEvents()  # tiles that arrived meanwhile are added here, inside the frame
                frames.append(time.perf_counter() - t1)
            settle = wait_tiles(app, view)
            fps = 1 / statistics.median(frames)
            print(f"frame, {name:10s}          {steps_ms(frames)}  ({fps:4.0f} fps at p50); "
                  f"tiles complete {settle * 1000:.0f} ms after the last step")

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"RSS: before the slide {rss_before:.0f} MB, end {rss_mb():.0f} MB, peak {peak:.0f} MB "
              f"(goal < 1024 MB); tile cache {view.tiles.cache.bytes / 2**20:.0f} MiB in {len(view.tiles.cache)} tiles")
        view.shutdown()
        jobs.shutdown()
        reader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
