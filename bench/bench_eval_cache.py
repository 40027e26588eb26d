"""Benchmark of evaluating at the model's speed (issue 32): first and repeat eval, fp32 and int8, each as ms per
image and as a fraction of this machine's measured work bound; what a cache hit costs.

Run: `python bench/bench_eval_cache.py [--images 8] [--rounds 3] [--commands]` (a few minutes). One run, one
machine; the variants run interleaved (first fp32, repeat fp32, first int8, repeat int8, then again), so a
neighbour's load hits each alike, and each prints its median and spread.

- The eval loop is `segscope eval`'s run: its truth check before the first image (core.dataset.preflight.
  prepare_truths, which reads every mask), then core.evaluate.evaluate_dataset overlapped, the int8 variant's fp32
  check on its first 4 images scored as `eval` scores it; on the demo slides (4000x3000 PNG, ROI 1800x1800 ->
  960x960).
  "first": the decoded-input cache empty (a fresh folder each round; the files themselves in the OS's page
  cache, as after `segscope demo`), so each image and mask is decoded and stored; "repeat": the same folder
  again, every image and mask a hit. The int8 model is made once before the rounds (as a repeat run finds it in
  the cache's int8/); its making is timed on its own.
- The work bound: the same images run one stage after another (no overlap), per image: the stages on one core
  each (read and decode or cache read, resize, preprocess, post-processing, the mask and the metrics; OpenCV on
  one thread) and the model on all cores; bound = model + the rest / cores, the best an overlapped loop can
  reach on this machine. It is measured in every round just before its variant (the host's speed drifts within
  a run), and printed beside each variant: its median wall per image and bound / wall per round (1.0 = the
  bound), median and range.
- Remote/local (unless `--no-remote`, or without /usr/sbin/sshd): "repeat remote fp32" runs the same loop through
  the remote backend over SSH on loopback (the test suite's throwaway sshd; the real worker, embedded on the
  "host", float32 results), interleaved with the others, its host input cache filled once before the rounds as
  the local cache is: each image goes as its content key. Printed: its ms per image, the per-round ratio to
  "repeat fp32" (median and spread; goal <= 1.3x) and the bytes sent per image. Client, sshd and worker share
  this machine's cores.
- Cache hit cost: hashing the file, reading and checking the entry, against decoding it.
- `--commands`: the whole `segscope eval --precision P` command as a new process (Python start, imports, model
  load, the int8 check included; SegScope byte-compiled first, as an installed package is), first and repeat,
  interleaved. `--baseline PYTHON` adds the same commands run by another SegScope (an interpreter whose
  environment holds, say, an earlier commit's worktree: `git worktree add /tmp/base REV && python -m venv
  --system-site-packages /tmp/base/.venv && /tmp/base/.venv/bin/pip install --no-deps -e /tmp/base`), interleaved
  with them, and prints this SegScope's time over the baseline's per round: a comparison that holds on a
  machine whose speed drifts (a shared host), where the absolute times do not.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import cv2
import timing
from bench_remote import load_sshd_launcher
from timing import interleaved, paired_ratios

from segscope.core.backends.base import Backend
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.backends.precision import FastSession, fast_session, spread
from segscope.core.backends.precision_check import AccuracyCheck, PrecisionBackend
from segscope.core.backends.precision_options import DEFAULT_CHECKS
from segscope.core.cache import settings
from segscope.core.cache.decoded import image_region, read_truth
from segscope.core.dataset.dataset import Dataset
from segscope.core.dataset.demo import generate_demo_dataset
from segscope.core.dataset.preflight import prepare_truths
from segscope.core.evaluate import evaluate_dataset, evaluation_request, score
from segscope.core.files.fileio import decode_box, decode_image, decode_mask, read_bytes
from segscope.core.profiling.machine import cpu_name
from segscope.core.remote.backend import RemoteBackend
from segscope.core.remote.connection import SshOptions
from segscope.core.stream.input import StreamInput
from segscope.core.stream.pipeline import DEFAULT_PIPELINE

CORES = os.cpu_count() or 1
STREAM = StreamInput.of(DEFAULT_PIPELINE)


def ms(values: list[float]) -> str:
    return timing.spread(values, 1000.0, "ms", 1)


def eval_loop(backend: Backend, dataset: Dataset) -> list[str]:
    """`segscope eval`'s run (without printing): every truth mask checked before the first image (`prepare_truths`:
    a first run decodes them there, on threads), then each image scored, the precision check's fp32 results too."""
    prepare_truths(dataset, backend.capabilities.class_names, backend.capabilities.details)
    check = AccuracyCheck(backend)
    outcomes = []
    for evaluation in evaluate_dataset(backend, dataset, stream=STREAM):
        check.add(evaluation)
        outcomes.append(repr(evaluation.metrics))
    return outcomes + [repr(check.summary())]


def work_per_image(backend: Backend, inner: EmbeddedBackend, dataset: Dataset) -> tuple[float, float]:
    """(seconds of single-core work, seconds of all-core model) per image, the stages one after another, OpenCV
    on one thread: its own pool would run a resize on both cores, and the rest / cores would count that twice."""
    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        return _stages(backend, inner, dataset)
    finally:
        cv2.setNumThreads(threads)


def _stages(backend: Backend, inner: EmbeddedBackend, dataset: Dataset) -> tuple[float, float]:
    single, model = 0.0, 0.0
    for item in dataset.items:
        request = evaluation_request(dataset, item, stream=STREAM)
        start = time.perf_counter()
        prepared = inner.prepare(request.image, request.roi)
        single += time.perf_counter() - start
        results = [backend._run(prepared)] if isinstance(backend, PrecisionBackend) else [inner.run(prepared)]
        reference = backend.take_reference() if isinstance(backend, PrecisionBackend) else None
        results += [reference] if reference is not None else []
        for result in results:
            placed = request.place(result)
            model += result.timings["infer"]
            single += result.timings["postprocess"]
            start = time.perf_counter()
            score(dataset, item, placed)
            single += time.perf_counter() - start
    return single / len(dataset), model / len(dataset)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8, help="demo slides (default 8, the demo dataset)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--commands", action="store_true", help="also time whole `segscope eval` commands")
    parser.add_argument("--baseline", metavar="PYTHON", default=None,
                        help="with --commands: also time the commands of the SegScope this interpreter runs (e.g. a "
                             "virtual environment holding an earlier commit's worktree), interleaved, with ratios")
    parser.add_argument("--no-remote", action="store_true", help="leave out the remote/local line")
    args = parser.parse_args()
    print(f"Machine: {cpu_name()}, {CORES} cores; load average {os.getloadavg()[0]:.2f} (1 min) before the run")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        generate_demo_dataset(root / "demo", count=args.images)
        dataset = Dataset.open(root / "demo")
        remote = None if args.no_remote else open_remote(root, stack)
        with EmbeddedBackend(DEFAULT_PIPELINE) as backend:
            int8 = make_int8(backend, dataset, root / "int8")
            report_loops(backend, int8, dataset, root, args.rounds, remote)
            report_hit_cost(dataset, root)
        if args.commands:
            report_commands(root / "demo", root, args.rounds, args.baseline)
    print(f"\nLoad average {os.getloadavg()[0]:.2f} (1 min) after the run")
    return 0


def open_remote(root: Path, stack: contextlib.ExitStack) -> RemoteBackend | None:
    """The remote backend over a throwaway sshd on loopback (closed with `stack`), or None without sshd."""
    launcher = load_sshd_launcher()
    (root / "sshd").mkdir()
    try:
        sshd = launcher.start_sshd(root / "sshd")
    except launcher.SshdUnavailable as exc:
        print(f"remote/local left out: {exc}")
        return None
    stack.callback(sshd.stop)
    known_hosts = root / "known_hosts"
    known_hosts.write_text(sshd.known_hosts_line())
    ssh = SshOptions(key_filename=sshd.user_key, allow_agent=False, look_for_keys=False, ssh_config=None,
                     known_hosts=known_hosts)
    return stack.enter_context(RemoteBackend(DEFAULT_PIPELINE, sshd.target, ssh, python=sys.executable,
                                             cache_dir=str(root / "host-cache"), worker_backend="embedded"))


def make_int8(backend: EmbeddedBackend, dataset: Dataset, folder: Path) -> FastSession:
    settings.configure(enabled=False)
    requests = [evaluation_request(dataset, item, stream=STREAM) for item in spread(dataset.items)]
    start = time.perf_counter()
    fast = fast_session(backend, "int8", requests, folder)
    print(f"int8 model made in {time.perf_counter() - start:.1f} s ({fast.runs_on}); a repeat run finds it in the "
          "cache's int8/")
    return replace(fast, prepared=[])  # each loop prepares every image, as a run does past its calibration


def report_loops(backend: EmbeddedBackend, int8: FastSession, dataset: Dataset, root: Path,
                 rounds: int, remote: RemoteBackend | None) -> None:
    n = len(dataset)
    folders = iter(range(1 << 30))

    def fast() -> Backend:
        return PrecisionBackend(backend, "int8", int8, DEFAULT_CHECKS)

    def variant(make: Callable[[], Backend], first: bool, name: str) -> Callable[[], object]:
        def run() -> object:
            folder = root / f"cache-{name}-{next(folders)}" if first else root / f"cache-{name}-filled"
            settings.configure(folder)
            outcome = eval_loop(make(), dataset)
            outcomes.setdefault(name, set()).add(tuple(outcome))
            return outcome
        return run

    outcomes: dict[str, set[tuple[str, ...]]] = {}
    for name in ("fp32", "int8"):  # the folders the repeats read: filled once
        settings.configure(root / f"cache-{name}-filled")
        eval_loop(backend if name == "fp32" else fast(), dataset)
    if remote is not None:  # the host's input cache too (and the truth masks, read here, in the local one)
        settings.configure(root / "cache-remote-filled")
        eval_loop(remote, dataset)
    work: dict[str, list[tuple[float, float]]] = {}  # per call: (the rest, the model), seconds per image

    def bound(make: Callable[[], Backend], first: bool, name: str) -> Callable[[], object]:
        def measure() -> object:
            folder = f"cache-{name}-bound-{next(folders)}" if first else f"cache-{name}-filled"
            settings.configure(root / folder)
            single, model = work_per_image(make(), backend, dataset)
            key = f"{'first' if first else 'repeat'} {name}"
            work.setdefault(key, []).append((single, model))
            return single, model
        return measure

    variants: dict[str, Callable[[], object]] = {}
    for name, make in (("fp32", lambda: backend), ("int8", fast)):
        for first in (True, False):  # each variant's bound measured beside it in every round: the host drifts
            key = f"{'first' if first else 'repeat'} {name}"
            variants[f"bound {key}"] = bound(make, first, name)
            variants[key] = variant(make, first, name)
    sent: list[int] = []  # bytes to the host per call, the warm-up call first
    if remote is not None:
        remote_repeat = variant(lambda: remote, False, "remote")

        def counted() -> object:
            before = remote.session.bytes_sent if remote.session is not None else 0
            outcome = remote_repeat()
            sent.append((remote.session.bytes_sent if remote.session is not None else 0) - before)
            return outcome

        variants["repeat remote fp32"] = counted
    times = interleaved(variants, rounds)
    remote_times = times.pop("repeat remote fp32", None)
    for name, values in work.items():
        single, model = (statistics.median(part[i] for part in values[-rounds:]) for i in (0, 1))
        print(f"work per image, {name}: model {model * 1000:.1f} ms on all cores, the rest {single * 1000:.1f} ms on "
              f"one core each -> bound {(model + single / CORES) * 1000:.1f} ms per image (medians)")
    print(f"\nsegscope eval loop over {n} demo slides, interleaved x{rounds}, per image, and the bound measured "
          "beside it in the same round over the loop's time (1.0 = the bound):")
    for name, values in work.items():
        per_image = [v / n for v in times[name]]
        reached = [(model + single / CORES) / t for (single, model), t in zip(values[-rounds:], per_image)]
        print(f"  {name:<12} {ms(per_image)}  reached {statistics.median(reached):.0%} of the bound "
              f"(rounds {min(reached):.0%}-{max(reached):.0%})")
    same = {name: len(found) == 1 for name, found in outcomes.items()}
    print(f"  identical metrics (and int8 check) in every round, first and repeat alike: {same}")
    for name in ("fp32", "int8"):
        first, repeat = statistics.median(times[f"first {name}"]), statistics.median(times[f"repeat {name}"])
        print(f"  {name}: repeat is {first / repeat:.2f}x the first eval's images/s")
    ratio = statistics.median(times["repeat fp32"]) / statistics.median(times["repeat int8"])
    print(f"  repeat int8 / repeat fp32 images/s: {ratio:.2f}x")
    if remote is not None and remote_times is not None:
        identical = outcomes["remote"] == outcomes["fp32"]
        print(f"  repeat remote fp32 (loopback, host input cache filled) {ms([v / n for v in remote_times])}; "
              f"sent {statistics.median(sent[1:]) / n / 1e3:.1f} kB per image; metrics identical to local: {identical}")
        print(f"  remote / local per image, repeat fp32: {paired_ratios(remote_times, times['repeat fp32'])}; "
              "goal <= 1.3x")


def report_hit_cost(dataset: Dataset, root: Path) -> None:
    item = dataset.items[0]
    box = dataset.roi_for(item)
    settings.configure(root / "cache-hit-cost")
    data = read_bytes(item.image_path)
    image_region(data, str(item.image_path), box)
    read_truth(item.truth_path)  # type: ignore[arg-type]
    mask_data = read_bytes(item.truth_path)  # type: ignore[arg-type]
    times = interleaved({  # (the decodes never look in the cache)
        "decode image (whole)": lambda: decode_image(data, "i"),
        "decode image, the ROI only": lambda: decode_box(data, "i", box),
        "decode mask (whole)": lambda: decode_mask(mask_data, "m"),
        "hit: read file + ROI": lambda: image_region(read_bytes(item.image_path), "i", box),
        "hit: read mask (whole)": lambda: read_truth(item.truth_path).whole(),  # type: ignore[arg-type]
        "hit: read mask, the ROI only": lambda: read_truth(item.truth_path).region(box),  # type: ignore[arg-type]
    }, 7)
    print(f"\nCache hit cost, one demo slide ({len(data) / 1e6:.1f} MB PNG, ROI {box.width}x{box.height}, entry "
          f"{box.width * box.height * 3 / 1e6:.1f} MB; mask {len(mask_data) / 1e3:.0f} kB, entry bit-packed, whole):")
    for name, values in times.items():
        print(f"  {name:<26} {ms(values)}")
    settings.configure()


def report_commands(demo: Path, root: Path, rounds: int, baseline: str | None) -> None:
    n = len(Dataset.open(demo))
    pythons = {"": sys.executable, **({" (baseline)": baseline} if baseline else {})}
    for python in pythons.values():  # byte-compiled first, as an installed package is (with PYTHONDONTWRITEBYTECODE
        # set, each command would otherwise compile SegScope's modules again: ~0.1 s)
        package = subprocess.run([python, "-c", "import os, segscope.core as c; print(os.path.dirname(c.__file__))"],
                                 check=True, capture_output=True, text=True).stdout.strip()
        subprocess.run([python, "-m", "compileall", "-q", package], check=True, capture_output=True)

    def run(python: str, precision: str, first: bool, folder: Path) -> Callable[[], object]:
        def go() -> object:
            if first:
                shutil.rmtree(folder / settings.DECODED, ignore_errors=True)  # the int8 model stays
            return subprocess.run([python, "-m", "segscope.core.cli", "eval", "--dataset", str(demo), "--precision",
                                   precision, "--cache-dir", str(folder)], check=True, capture_output=True)
        return go

    times = interleaved({f"{'first' if first else 'repeat'} {p}{label}":
                         run(python, p, first, root / f"command-cache-{p}{'-baseline' if label else ''}")
                         for p in ("fp32", "int8") for first in (True, False)
                         for label, python in pythons.items()}, rounds)
    print(f"\nWhole `segscope eval` command on {n} demo slides (a new process: start, imports, model load, "
          f"the loop), interleaved x{rounds}, per image:")
    for name, values in times.items():
        print(f"  {name:<23} {ms([v / n for v in values])}")
    if baseline:
        print(f"  this SegScope / the baseline's ({baseline}), per round:")
        for name, values in times.items():
            if not name.endswith("(baseline)"):
                print(f"  {name:<23} {paired_ratios(values, times[f'{name} (baseline)'])}")


if __name__ == "__main__":
    sys.exit(main())
