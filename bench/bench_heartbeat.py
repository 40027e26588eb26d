"""How late the viewer's event loop gets during its long actions: an in-process heartbeat (a queued signal to
the GUI thread every 20 ms, bench/heartbeat.py) prints the 99th percentile and the maximum lateness per action.

    python bench/bench_heartbeat.py [--images 8] [--big 16384] [--skip-big]

The real window at 1280x800 (offscreen), the shipped demo model on the embedded backend, the Error regions dock in
front (the costliest view to keep up to date). On 8 demo slides of 4000x3000: open, Run all, a brush stroke
and Save, Export of every kind, Run whole slide, then a new window reopening the dataset (its runs restored
from disk) and Run all again; on a 16k x 16k slide (a demo slide tiled): open, Run, Save, Export, Run whole
slide. Each action counts from its start until its work is done (the batch finished, the file written, the
background idle) plus a second of settling. Budget (the issue's): p99 <= 100 ms, max <= 250 ms. The machine
and its load are printed (a shared 2-core machine stalls more).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from bench_viewer_run import write_slide
from heartbeat import Heartbeat, summarize
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication, QMessageBox

from segscope.core.dataset.demo import generate_demo_dataset
from segscope.core.profiling.machine import cpu_name
from segscope.core.stream.pipeline import DEFAULT_PIPELINE

SETTLE_S = 1.0


class Bench:
    def __init__(self, app: QApplication) -> None:
        self.app = app
        self.heartbeat = Heartbeat()
        self.heartbeat.start()

    def wait(self, done: Callable[[], bool], timeout_s: float = 1800) -> None:
        end = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > end:
                raise TimeoutError("the action did not finish")
            self.app.processEvents()
            time.sleep(0.002)

    def measure(self, name: str, start: Callable[[], object], done: Callable[[], bool]) -> None:
        self.heartbeat.take()
        began = time.perf_counter()
        start()
        self.wait(done)
        seconds = time.perf_counter() - began
        self.wait(lambda: time.perf_counter() - began > seconds + SETTLE_S)
        line = summarize(self.heartbeat.take()).line(name) + f"  {seconds:6.1f} s"
        print(line, flush=True)


def new_window(bench: Bench):
    from segscope.core.backend_choice import BackendChoice
    from segscope.gui.shell.main_window import MainWindow

    window = MainWindow()
    window.resize(1280, 800)
    window.show()
    window.inspection.review_dock.raise_()
    window.commands.open_backend(BackendChoice(pipeline=DEFAULT_PIPELINE))
    bench.wait(lambda: window.capabilities is not None)
    return window


def idle(window) -> Callable[[], bool]:
    return lambda: not window.controller.busy and not window.jobs.pending and not window.scorer.busy


def actions(bench: Bench, window, dataset: Path, label: str, run_all: bool) -> None:
    from segscope.gui.dialogs.export_dialog import ExportChoices

    bench.measure(f"{label}: open", lambda: window.commands.open_dataset(dataset),
                  lambda: window.slide_ready() and idle(window)())
    bench.measure(f"{label}: Run all" if run_all else f"{label}: Run", window.commands.run_all if run_all else
                  window.commands.run_current, lambda: idle(window)() and window.panels.result is not None)
    saved: list[Path] = []
    window.editing.saved.connect(saved.append)

    def stroke() -> None:
        document, result = window.editing.document_for_edit(), window.editing.shown_result()
        roi = result.roi
        x, y = (roi.x0 + roi.x1) / 2, (roi.y0 + roi.y1) / 2
        for class_index in (1, 0):  # paint the defect class; where it is all defect already, erase
            window.editing.changed(document.stroke(result, [(x - 150, y - 80), (x + 150, y + 80)], 25, class_index))
            if window.editing.dirty:
                break

    bench.measure(f"{label}: first brush stroke", stroke, idle(window))
    bench.measure(f"{label}: Save", window.editing.save, lambda: bool(saved) and idle(window)())
    exported: list[list[Path]] = []
    window.exporter.finished.connect(exported.append)
    out = Path(tempfile.mkdtemp(prefix="segscope-bench-export-"))
    ids = tuple(window.session.result_ids)
    bench.measure(f"{label}: Export (all kinds, {len(ids)} images)", lambda: window.commands.write_export(
        ExportChoices(("mask", "canvas", "softmax", "heatmap"), True, out, "all", ids, False)),
        lambda: bool(exported) and idle(window)())
    bench.measure(f"{label}: Run whole slide", window.commands.run_whole_slide,
                  lambda: idle(window)() and window.slide.overlay.pyramid is not None)
    shutil.rmtree(out, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8, help="demo slides of 4000x3000 (default 8)")
    parser.add_argument("--big", type=int, default=16384, help="side of the big slide (default 16384)")
    parser.add_argument("--skip-big", action="store_true")
    args = parser.parse_args(argv)
    settings_dir = tempfile.mkdtemp(prefix="segscope-bench-settings-")
    for fmt in (QSettings.Format.NativeFormat, QSettings.Format.IniFormat):
        QSettings.setPath(fmt, QSettings.Scope.UserScope, settings_dir)
    app = QApplication.instance() or QApplication(["bench_heartbeat"])
    QMessageBox.question = staticmethod(lambda *a, **k: QMessageBox.StandardButton.Discard)  # type: ignore[method-assign]
    print(f"Machine: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} (1 min) before; "
          "budget p99 <= 100 ms, max <= 250 ms", flush=True)
    bench = Bench(app)
    with tempfile.TemporaryDirectory(prefix="segscope-bench-heartbeat-") as tmp:
        demo = Path(tmp) / "demo"
        generate_demo_dataset(demo, count=args.images)
        window = new_window(bench)
        actions(bench, window, demo, f"{args.images} x 4000x3000", run_all=True)
        window.close()
        window = new_window(bench)
        bench.measure(f"{args.images} x 4000x3000: reopen (restore)", lambda: window.commands.open_dataset(demo),
                      lambda: window.slide_ready() and idle(window)() and len(window.session.result_ids) == args.images)
        bench.measure(f"{args.images} x 4000x3000: Run all (reopened)", window.commands.run_all, idle(window))
        window.close()
        if not args.skip_big:
            big = Path(tmp) / "big"
            write_slide(big / "slide", args.big)
            window = new_window(bench)
            actions(bench, window, big, f"{args.big}x{args.big}", run_all=False)
            window.close()
    bench.heartbeat.stop()
    print(f"Load average {os.getloadavg()[0]:.2f} (1 min) after the run", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
