"""The session store's CPU per result during a Run all (issue 39): what `SessionStore` costs beside the pipeline.

Run: `python bench/bench_store.py [--results 1000] [--rounds 3] [--baseline REV] [--profile]` (about 10 s a round
per variant). Each variant stores `--results` results of a 128x128 2-class model on 256x192 images (a 192x256x2
float32 probabilities array and its uint8 argmax, ~440 KB a file) as the viewer's Run all does: `submit` every
`--interval` ms from one thread that first spends `--busy` ms in Python code (the pipeline's share that holds the
interpreter lock; the rest of the interval it sleeps, as the pipeline waits in native code), the store's thread
writing them in batches (`BATCH_SECONDS`), then `flush`; into a new store folder (in the system's temporary
folder) bounded by `--max-mb` (by default about half the results' bytes, so the second half of the run trims the
folder as a long Run all does at the default bound). Measured per variant, per result: the store thread's CPU (user
and system, from /proc/self/task/<tid>/stat: user time is mostly Python, which holds the interpreter lock, and the
CRC-32 of the arrays, which does not; system time is the kernel's, with the lock released), and how long the
pipeline's Python code waited for the interpreter lock ("blocked": its wall time less its CPU time and its wait for
a CPU, /proc/self/task/<tid>/schedstat, summed over its busy spells): the store's cost to a run bound by the lock.

`--baseline REV`: the store of that commit (core/session/store.py as `git show REV:` gives it, importing this
tree's other modules) run interleaved with this tree's (A B A B ...), and the per-round ratio printed.
`--profile`: one more Run all of each variant with cProfile (CPU clock) in the store thread: its CPU split into
calls that release the interpreter lock and the rest, its top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from timing import paired_ratios

from segscope.core.files.stamp import Stamp
from segscope.core.profiling.machine import cpu_name
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.session import store as current_store

ROOT = Path(__file__).resolve().parents[1]
WIDTH, HEIGHT = 256, 192
TICKS = os.sysconf("SC_CLK_TCK")


def _result() -> InferenceResult:
    """One result as a 2-class model gives it in the viewer's Run all, with its image file's identity (never
    changed after the run, so shared by every image here)."""
    p1 = np.random.default_rng(0).random((HEIGHT, WIDTH), dtype=np.float32)
    probabilities = np.stack([1 - p1, p1], axis=-1)
    return InferenceResult(probabilities, probabilities.argmax(axis=-1).astype(np.uint8), Roi(0, 0, WIDTH, HEIGHT),
                           (WIDTH, HEIGHT), {"read": 0.001, "inference": 0.005}, "onnxruntime",
                           image=Stamp(150_000, 1_765_000_000_000_000_000, 1_234_567, "ab" * 32))


def _baseline(rev: str) -> ModuleType:
    """The store module of commit `rev`, loaded beside this tree's (its relative imports resolve in this tree)."""
    source = subprocess.run(["git", "show", f"{rev}:core/session/store.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    name = "segscope.core.session._bench_baseline_store"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "segscope.core.session"
    sys.modules[name] = module
    exec(compile(source, f"{rev}:core/session/store.py", "exec"), module.__dict__)  # noqa: S102 - our own commit
    return module


def _thread_cpu(tid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of this process's thread `tid`."""
    fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS


def _schedstat() -> tuple[float, float]:
    """(seconds on a CPU, seconds waiting for one) of the calling thread."""
    run, wait, _ = Path(f"/proc/self/task/{threading.get_native_id()}/schedstat").read_text().split()
    return int(run) / 1e9, int(wait) / 1e9


def _busy(seconds: float) -> float:
    """Run Python code for `seconds` of this thread's CPU; the seconds it was blocked meanwhile (not on a CPU nor
    waiting for one: waiting for the interpreter lock)."""
    wall, (run, queue) = time.perf_counter(), _schedstat()
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    now_run, now_queue = _schedstat()
    return time.perf_counter() - wall - (now_run - run) - (now_queue - queue)


def run_all(module: ModuleType, folder: Path, results: int, interval: float, busy: float, max_bytes: int,
            profile: cProfile.Profile | None = None) -> dict[str, float]:
    """Per result of one Run all's stores: the store thread's CPU seconds (user, system), the seconds the
    pipeline's Python code was blocked."""
    result = _result()
    folder.mkdir()
    store = module.SessionStore(folder, max_bytes)
    if profile is not None:
        save_batch = store.save_batch

        def profiled(batch: Any) -> Any:
            return profile.runcall(save_batch, batch)

        store.save_batch = profiled
    blocked = 0.0
    for n in range(results):
        blocked += _busy(busy)
        store.submit(f"image-{n:05d}.png", result)
        time.sleep(interval - busy)
    store.flush()
    assert not store.take_errors()
    (thread,) = store._executor._threads
    user, system = _thread_cpu(thread.native_id)
    store._executor.shutdown()
    kept = sum(1 for _ in store.folder.glob("*.npz"))
    return {"user": user / results, "system": system / results, "store": (user + system) / results,
            "blocked": blocked / results, "kept": kept}


#: Profiled calls that release the interpreter lock (system calls, CRC-32 of large buffers, closing a file).
RELEASING = ("<built-in method posix.", "<built-in method zlib.crc32>", "<method 'write' of '_io.BufferedWriter'",
             "<method '__exit__' of '_io.", "<method 'close' of '_io.")


def _print_profile(name: str, stats: pstats.Stats, results: int) -> None:
    """The store thread's profiled CPU per result, split into calls that release the interpreter lock and the
    rest (the interpreter's; the profiler's own cost falls there, so that share is inflated), then its top
    functions."""
    entries = stats.stats.items()  # type: ignore[attr-defined]  # (pstats' table: function -> timings)
    released = sum(timing[2] for (_, _, function), timing in entries if function.startswith(RELEASING))
    total, calls = sum(timing[2] for _, timing in entries), sum(timing[1] for _, timing in entries)
    print(f"\n{name}, profiled (CPU clock): {total / results * 1000:.3f} ms per result, of which "
          f"{released / results * 1000:.3f} ms in calls releasing the interpreter lock, "
          f"{(total - released) / results * 1000:.3f} ms holding it; {calls / results:.0f} calls per result")
    stats.sort_stats("tottime").print_stats(20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--interval", type=float, default=5.0, help="ms between two results submitted")
    parser.add_argument("--busy", type=float, default=2.0, help="ms of Python code run before each result")
    parser.add_argument("--max-mb", type=float, default=None, help="the store's bound (default: half the results)")
    parser.add_argument("--baseline", help="a commit whose store runs interleaved with this tree's")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    nbytes = _result().probabilities.nbytes + _result().argmax.nbytes
    max_bytes = int(args.max_mb * (1 << 20)) if args.max_mb is not None else args.results * nbytes // 2
    print(f"Machine: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} (1 min) before "
          f"the run; {args.results:,} results of {nbytes:,} bytes, one every {args.interval} ms after {args.busy} ms "
          f"of Python code, store bound "
          f"{max_bytes / (1 << 20):.0f} MB")
    variants = {"this tree": current_store}
    if args.baseline:
        variants = {f"baseline {args.baseline}": _baseline(args.baseline), **variants}
    measured: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="segscope-bench-store-") as tmp:
        for name, module in variants.items():  # (warm-up: imports, first folder)
            run_all(module, Path(tmp) / f"warm-{len(name)}", 50, args.interval / 1000, args.busy / 1000, max_bytes)
        for n in range(args.rounds):
            for i, (name, module) in enumerate(variants.items()):
                measured[name].append(run_all(module, Path(tmp) / f"{n}-{i}", args.results, args.interval / 1000,
                                              args.busy / 1000, max_bytes))
        for name, rounds in measured.items():
            line = ", ".join(f"{key} {statistics.median(r[key] for r in rounds) * 1000:.3f} ms "
                             f"({min(r[key] for r in rounds) * 1000:.3f}-{max(r[key] for r in rounds) * 1000:.3f})"
                             for key in ("store", "user", "system", "blocked"))
            print(f"{name:20} per result, median (min-max) of {len(rounds)}: {line}; "
                  f"{statistics.median(r['kept'] for r in rounds):.0f} files kept")
        if args.baseline:
            names = list(variants)
            for key in ("store", "user", "blocked"):
                print(f"{key}, this tree / baseline per round: "
                      f"{paired_ratios([r[key] for r in measured[names[1]]], [r[key] for r in measured[names[0]]])}")
        if args.profile:
            for name, module in variants.items():
                profile = cProfile.Profile(time.thread_time)  # (CPU, not wall: fsync waits for the disk)
                run_all(module, Path(tmp) / f"profiled-{len(name)}", args.results, args.interval / 1000,
                        args.busy / 1000, max_bytes, profile)
                _print_profile(name, pstats.Stats(profile), args.results)
    print(f"Load average {os.getloadavg()[0]:.2f} (1 min) after the run")


if __name__ == "__main__":
    main()
