"""The viewer at dataset scale (issue 39): the real window, offscreen, on generated datasets of N images with a
tiny 128x128 model (so the model costs a few ms an image and the window's own work shows).

    python bench/bench_viewer_scale.py [--sizes 100,1000] [--rounds R] [--steps 30] [--table 100000]

Per N (flat folders of `imgNNNNN.png` + `imgNNNNN_mask.png`, 256x192, 0/255 masks, every image distinct): `segscope
eval --dataset D --model CARD --backend embedded` (a subprocess: its wall includes its start) and the window's Run
all on the same data, interleaved round by round after one untimed eval that fills the decoded-input cache both
read; the window's GUI-thread CPU per result (`time.thread_time()` in the GUI thread between consecutive
`result_added` events) by tenth of the last Run all; the window's total GUI-thread CPU over that Run all (its
log-log slope against N over the sizes run); the event loop's lateness (bench/heartbeat.py: the longest stall and
its 99th percentile of beats posted from a thread, the goal's measure, and beside it of the GUI thread's own timer,
which no other thread's wait for the GIL delays) while the dataset opens, during Run all and while stepping; PgDown
to the next image after the run, over the last images (whose arrays the history keeps), until its slide and result
panels are drawn; the process's RSS after each phase; then a new window reopens the dataset (as after a restart: the
runs the session store kept are restored): until the table is usable, until the rows on screen that have a stored
run show it, until every stored run is restored, scored and drawn, with the event loop's lateness meanwhile. Then
the time until a 100,000-image dataset's table is usable (hard links of a few hundred files: nothing is inferred
there). Run all counts from the click until every result is in, scored and drawn (`MainWindow.redraws_due`).

Goals (the issue's): Run all / eval <= 1.2 at every N; last tenth <= 1.5x the first and median <= 2 ms per
result; slope <= 1.1; stalls max <= 100 ms, p99 <= 30 ms; PgDown median <= 50 ms at 10,000; usable table
<= 2 s at 100,000. N=10,000 takes several minutes on 2 cores: ask for it with --sizes. QSettings and the cache
live in a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
TMP = Path(tempfile.mkdtemp(prefix="segscope-bench-scale-"))
os.environ["SEGSCOPE_CACHE_DIR"] = str(TMP / "cache")  # (read by the viewer and the eval subprocesses alike)
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))

import cv2  # noqa: E402
import numpy as np  # noqa: E402
from heartbeat import Heartbeat, Lateness, TimerHeartbeat, summarize  # noqa: E402
from PySide6.QtCore import QEvent, QEventLoop, QSettings, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402
from timing import spread  # noqa: E402

from segscope.core.profiling.machine import cpu_name  # noqa: E402
from segscope.core.session.store import STORE_DIR_NAME  # noqa: E402

from helpers import make_tiny_onnx, tiny_card  # noqa: E402

MODEL_SIZE = 128
IMAGE_W, IMAGE_H = 256, 192
#: Distinct files behind the 100,000-image table (hard links: nothing is inferred there).
TABLE_FILES = 400
GOALS = {"ratio": 1.2, "flat": 1.5, "median_ms": 2.0, "slope": 1.1, "max_ms": 100.0, "p99_ms": 30.0,
         "pgdown_ms": 50.0, "table_s": 2.0}


def verdict(ok: bool) -> str:
    return "ok" if ok else "OVER"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ------------------------------------------------------------------------------------------------- data
def write_pair(folder: Path, name: str, rng: np.random.Generator) -> None:
    """One image (a dark box on a light noisy ground) and its 0/255 mask (the box, shifted a little)."""
    image = np.full((IMAGE_H, IMAGE_W, 3), 200, np.uint8)
    mask = np.zeros((IMAGE_H, IMAGE_W), np.uint8)
    x, y = int(rng.integers(10, 200)), int(rng.integers(10, 140))
    w, h = int(rng.integers(8, 50)), int(rng.integers(8, 40))
    image[y:y + h, x:x + w] = 40
    mask[y + 2:y + h, x:x + w + 3] = 255
    image += rng.integers(0, 20, image.shape, dtype=np.uint8)
    cv2.imwrite(str(folder / f"{name}.png"), image)
    cv2.imwrite(str(folder / f"{name}_mask.png"), mask)


def make_datasets(root: Path, sizes: list[int]) -> dict[int, Path]:
    """A folder per size: the first N of one set of distinct images (hard links; a folder per size keeps each
    window's session store its own)."""
    source = root / "source"
    source.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for n in range(max(sizes)):
        write_pair(source, f"img{n:05d}", rng)
    folders = {}
    for size in sizes:
        folder = root / f"n{size}"
        folder.mkdir()
        for n in range(size):
            for suffix in (".png", "_mask.png"):
                os.link(source / f"img{n:05d}{suffix}", folder / f"img{n:05d}{suffix}")
        folders[size] = folder
    return folders


def make_table_dataset(root: Path, count: int) -> Path:
    files = root / "table_files"
    files.mkdir(parents=True)
    rng = np.random.default_rng(1)
    for n in range(TABLE_FILES):
        write_pair(files, f"f{n}", rng)
    folder = root / f"table{count}"
    folder.mkdir()
    for n in range(count):
        for suffix in (".png", "_mask.png"):
            os.link(files / f"f{n % TABLE_FILES}{suffix}", folder / f"img{n:06d}{suffix}")
    return folder


def make_model(root: Path) -> Path:
    root.mkdir(parents=True)
    make_tiny_onnx(root / "tiny.onnx", MODEL_SIZE)
    card = root / "tiny.json"
    card.write_text(json.dumps(tiny_card(MODEL_SIZE)))
    shutil.copyfile(REPO / "models" / "aipp_unet_simple_opencv.cfg", root / "aipp_unet_simple_opencv.cfg")
    return card


def eval_seconds(dataset: Path, card: Path) -> float:
    """The wall of `segscope eval` on the dataset (its start included, as a user waits for it)."""
    command = [str(Path(sys.executable).parent / "segscope"), "eval", "--dataset", str(dataset), "--model",
               str(card), "--backend", "embedded"]
    began = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began


# ------------------------------------------------------------------------------------------------ window
class Bench:
    def __init__(self, app: QApplication) -> None:
        self.app = app
        self.heartbeat, self.timer_beat = Heartbeat(), TimerHeartbeat()
        self.heartbeat.start()
        self.timer_beat.start()

    def wait(self, done: Callable[[], bool], timeout_s: float = 3600) -> None:
        """Run the event loop (as the application does) until `done()`, checked every 5 ms."""
        if done():
            return
        loop, timer = QEventLoop(), QTimer()
        deadline = time.monotonic() + timeout_s
        expired = []

        def check() -> None:
            if done():
                loop.quit()
            elif time.monotonic() > deadline:
                expired.append(True)
                loop.quit()

        timer.timeout.connect(check)
        timer.start(5)
        loop.exec()
        timer.stop()
        if expired:
            raise TimeoutError("the window did not finish in time")

    def lateness(self) -> Stalls:
        """The lateness of the beats handled since the last call."""
        return Stalls(summarize(self.heartbeat.take()), summarize(self.timer_beat.take()))

    def start_phase(self) -> None:
        """Let the event loop handle the beats that piled up while the bench itself held the GUI thread (an
        eval subprocess, writing a dataset), then start counting."""
        until = time.monotonic() + 0.2
        self.wait(lambda: time.monotonic() > until)
        self.heartbeat.take()
        self.timer_beat.take()


def idle(window) -> Callable[[], bool]:
    """Nothing running, queued, due to be scored or due to be drawn."""
    return lambda: (not window.controller.busy and not window.jobs.pending and not window.scorer.busy
                    and not window.redraws_due())


def drawn(window, item_id: str) -> bool:
    """Whether `item_id` is the image on screen: its slide, its result panels and headline drawn, nothing left
    to read for it (tiles, crops). A redraw of the dataset's means still due (at most `REFRESH_MS` after the
    previous one) is left to the event loop: it shows nothing new of this image."""
    return (window.current is not None and window.current.id == item_id and window.slide_ready()
            and window.panels.result is window.session.result(item_id) and not window.jobs.pending
            and not window.controller.busy and not window.scorer.busy)


def new_window(bench: Bench, card: Path):
    from segscope.core.backend_choice import BackendChoice
    from segscope.gui.runtime.collector import freeze_startup_objects
    from segscope.gui.shell.main_window import MainWindow

    gc.unfreeze()  # (what the windows before it left is collected, as the start of the application finds none)
    window = MainWindow()
    window.resize(1280, 800)
    window.commands.open_backend(BackendChoice(pipeline=card))
    window.show()
    freeze_startup_objects()  # as `segscope` does at its start
    bench.wait(lambda: window.capabilities is not None, 120)
    return window


def dispose(window) -> None:
    """Close the window and delete it, as the application lets a dataset's state go when another opens (closed
    windows kept alive would leave the next phases a heap the application never has: the collector's walks grow
    with it). `new_window` collects what is left."""
    window.close()
    window.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@dataclass(frozen=True)
class Stalls:
    """The event loop's lateness during an action: beats posted from a thread (`Heartbeat`: the goal's measure)
    and the GUI thread's own timer (`TimerHeartbeat`: what the user's input waits)."""

    posted: Lateness
    timer: Lateness


def lateness_line(name: str, late: Stalls) -> str:
    posted, timer = late.posted, late.timer
    ok = posted.max * 1000 <= GOALS["max_ms"] and posted.p99 * 1000 <= GOALS["p99_ms"]
    return (f"    {name:<9} stall max {posted.max * 1000:7.1f} ms, p99 {posted.p99 * 1000:6.1f} ms "
            f"({posted.beats} beats)  {verdict(ok)}; GUI timer: max {timer.max * 1000:.1f}, p99 "
            f"{timer.p99 * 1000:.1f} ms")


def measure_size(bench: Bench, card: Path, dataset: Path, size: int, rounds: int, steps: int) -> dict[str, float]:
    """One window on the dataset: open, Run all and eval interleaved, then PgDown; prints and returns the
    figures the summary needs."""
    print(f"\nN = {size:,} images", flush=True)
    eval_seconds(dataset, card)  # fills the decoded-input cache both read
    window = new_window(bench, card)
    rss = {"window": rss_mb()}
    bench.start_phase()
    began = time.perf_counter()
    window.commands.open_dataset(dataset)
    bench.wait(lambda: window.slide_ready() and idle(window)())
    opened, late_open = time.perf_counter() - began, bench.lateness()
    rss["open"] = rss_mb()

    arrivals: list[float] = []  # the GUI thread's CPU clock at each result
    window.session.events.result_added.connect(lambda _added: arrivals.append(time.thread_time()))
    evals, walls, gui_totals, late_runs = [], [], [], []
    for _ in range(rounds):
        evals.append(eval_seconds(dataset, card))
        arrivals.clear()
        bench.start_phase()
        cpu, began = time.thread_time(), time.perf_counter()
        assert window.commands.run_all()
        bench.wait(lambda: idle(window)() and len(arrivals) >= size)
        walls.append(time.perf_counter() - began)
        gui_totals.append(time.thread_time() - cpu)
        late_runs.append(bench.lateness())
    rss["run all"] = rss_mb()
    deltas = [(b - a) * 1000 for a, b in zip(arrivals, arrivals[1:])]
    tenths = [statistics.fmean(part) for part in np.array_split(np.asarray(deltas), 10) if len(part)]

    panel = window.dataset_panel
    first = max(0, size - steps - 1)  # the newest runs: those whose arrays the history keeps (capped)
    panel.select_row(first)
    bench.wait(lambda: window.slide_ready() and idle(window)())
    bench.start_phase()
    step_ms = []
    for row in range(first + 1, size):
        target = panel.model.item_at(row)
        began = time.perf_counter()
        window.main_actions.next_action.trigger()  # PgDown
        bench.wait(partial(drawn, window, target), 60)
        step_ms.append((time.perf_counter() - began) * 1000)
    late_steps = bench.lateness()
    rss["stepping"] = rss_mb()
    gc.unfreeze()  # (what the window's freezes kept that is garbage now, found by one full walk: runtime.collector)
    held = gc.collect()
    dispose(window)  # (its session store's writes end first)
    window = None  # (the lambdas above hold its cell: let it go)
    reopened = measure_reopen(bench, card, dataset)
    rss["reopen"] = rss_mb()

    ratios = [w / e for w, e in zip(walls, evals)]
    late_run = max(late_runs, key=lambda late: late.posted.max)
    print(f"  open {opened:.2f} s; eval {spread(evals)}; Run all {spread(walls)}", flush=True)
    print(f"  Run all / eval: median {statistics.median(ratios):.2f} (per round: "
          f"{', '.join(f'{r:.2f}' for r in ratios)})  {verdict(statistics.median(ratios) <= GOALS['ratio'])}")
    median = statistics.median(deltas) if deltas else float("nan")
    flat = tenths[-1] / tenths[0] if tenths and tenths[0] else float("nan")
    print(f"  GUI thread per result (last Run all), ms by tenth: {' '.join(f'{t:.2f}' for t in tenths)}")
    print(f"    last/first tenth {flat:.2f}  {verdict(flat <= GOALS['flat'])}; median {median:.2f} ms  "
          f"{verdict(median <= GOALS['median_ms'])}; GUI thread over the Run all {gui_totals[-1]:.2f} s "
          f"({gui_totals[-1] / walls[-1] * 100:.0f} % of its wall)")
    print("  event loop:")
    print(lateness_line("open", late_open))
    print(lateness_line("Run all", late_run))
    print(lateness_line("stepping", late_steps))
    print(lateness_line("reopen", reopened.late))
    pgdown = statistics.median(step_ms) if step_ms else float("nan")
    print(f"  PgDown to the next image (drawn): {spread(step_ms, 1, 'ms', 1)}"
          + (f"  {verdict(pgdown <= GOALS['pgdown_ms'])}" if size >= 10_000 else ""))
    print(f"  reopen (a new window, as after a restart): {reopened.restored:,} stored runs of {reopened.stored:,} "
          f"files restored; table usable {reopened.usable:.2f} s, the rows on screen that have one "
          f"({reopened.visible}) have their stored result after {reopened.visible_s:.2f} s, every one after "
          f"{reopened.all_s:.2f} s (scored, drawn)")
    print(f"  reference cycles the window's freezes kept from the collector (open, Run all, stepping): {held:,} "
          "objects")
    print("  RSS: " + ", ".join(f"{phase} {mb:.0f} MB" for phase, mb in rss.items()), flush=True)
    return {"gui_total": gui_totals[-1]}


@dataclass
class Reopened:
    stored: int  # result files in the dataset's session store
    restored: int
    usable: float  # seconds until the table holds every row, the first selected
    visible: int  # rows on screen that got a stored result
    visible_s: float  # seconds until the last of those had it
    all_s: float  # seconds until every stored result was restored, scored and drawn
    late: Stalls


def measure_reopen(bench: Bench, card: Path, dataset: Path) -> Reopened:
    """A new window opens the dataset a closed one ran (as after a restart): until its table is usable, until the
    rows on screen that have a stored run show it, until every stored run is restored (scored, drawn); the event
    loop's lateness over it all. The session store keeps the newest runs within its bound (`DEFAULT_MAX_BYTES`),
    so of a large run only the newest are stored."""
    stored = len(list((dataset / STORE_DIR_NAME).glob("*.npz")))
    window = new_window(bench, card)
    arrived: dict[str, float] = {}
    window.session.events.result_added.connect(
        lambda added: arrived.setdefault(added.item_id, time.perf_counter()) if added.restored else None)
    bench.start_phase()
    began = time.perf_counter()
    window.commands.open_dataset(dataset)
    bench.wait(lambda: window.dataset_panel.model.rowCount() > 0 and window.current is not None)
    usable = time.perf_counter() - began
    on_screen = window.dataset_panel.rows_on_screen()
    bench.wait(lambda: not window.jobs.busy("restore") and window.slide_ready() and idle(window)())
    done = time.perf_counter() - began
    late = bench.lateness()
    visible = [arrived[i] for i in on_screen if i in arrived]
    dispose(window)
    return Reopened(stored, len(arrived), usable, len(visible), max(visible, default=began) - began, done, late)


def measure_table(bench: Bench, card: Path, dataset: Path, count: int) -> None:
    """Open a dataset of `count` images: until its table holds every row, the first selected, and the event loop
    has drawn it (usable); then until the first image's slide is shown. (Its masks are checked against the
    model's rule on a worker meanwhile, as `eval` checks them before a run.)"""
    print(f"\nTable of {count:,} images", flush=True)
    window = new_window(bench, card)
    model = window.dataset_panel.model
    bench.start_phase()
    before = rss_mb()
    began = time.perf_counter()
    window.commands.open_dataset(dataset)
    bench.wait(lambda: model.rowCount() == count and window.current is not None)
    usable = time.perf_counter() - began
    bench.wait(window.slide_ready)
    shown = time.perf_counter() - began
    late = bench.lateness()
    grown = rss_mb() - before
    print(f"  usable table {usable:.2f} s  {verdict(usable <= GOALS['table_s'])}; first image shown "
          f"{shown:.2f} s; RSS {rss_mb():.0f} MB ({grown:+.0f} MB for the open: {grown * 1024 * 1024 / count:.0f} "
          "bytes an image)")
    print(lateness_line("open", late), flush=True)
    dispose(window)


def slope(points: dict[int, float]) -> float:
    """The least-squares slope of log(total) against log(N)."""
    xs, ys = [math.log(n) for n in points], [math.log(t) for t in points.values()]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000", help="dataset sizes, comma-separated (default 100,1000; "
                        "the issue's: 100,1000,10000)")
    parser.add_argument("--rounds", type=int, default=0, help="eval and Run all rounds per size, interleaved "
                        "(default: 3 up to 1,000 images, 1 above)")
    parser.add_argument("--steps", type=int, default=30, help="PgDown presses after the run (default 30)")
    parser.add_argument("--table", type=int, default=100_000, help="images of the table-only dataset (0: skip)")
    args = parser.parse_args(argv)
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    for fmt in (QSettings.Format.NativeFormat, QSettings.Format.IniFormat):
        QSettings.setPath(fmt, QSettings.Scope.UserScope, str(TMP / "settings"))
    app = QApplication.instance() or QApplication(["bench_viewer_scale"])
    print(f"Machine: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} (1 min) before; "
          f"sizes {', '.join(f'{n:,}' for n in sizes)}; a {MODEL_SIZE}x{MODEL_SIZE} model on {IMAGE_W}x{IMAGE_H} "
          "images", flush=True)
    try:
        card = make_model(TMP / "model")
        began = time.perf_counter()
        folders = make_datasets(TMP / "data", sizes) if sizes else {}
        print(f"(datasets written in {time.perf_counter() - began:.0f} s)", flush=True)
        bench = Bench(app)
        totals = {}
        for size in sizes:
            rounds = args.rounds or (3 if size <= 1000 else 1)
            totals[size] = measure_size(bench, card, folders[size], size, rounds, args.steps)["gui_total"]
        if len(totals) >= 2:
            fitted = slope(totals)
            print(f"\nWindow's GUI-thread CPU over Run all against N: log-log slope {fitted:.2f} "
                  f"({', '.join(f'{n:,}: {t:.2f} s' for n, t in totals.items())})  {verdict(fitted <= GOALS['slope'])}")
        if args.table:
            measure_table(bench, card, make_table_dataset(TMP / "data", args.table), args.table)
        bench.heartbeat.stop()
        bench.timer_beat.stop()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print(f"Load average {os.getloadavg()[0]:.2f} (1 min) after the run", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
