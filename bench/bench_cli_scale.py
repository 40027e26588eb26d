"""Memory of `segscope eval` at dataset scale (issue 39): the peak RSS of the whole command, run as a new process,
at several dataset sizes, with and without `--json` and `--export`, and its seconds per image. Not a timed test:
what it shows is the slope of the peak against the images, which is flat when nothing is kept per image beyond
the compact bookkeeping the README states.

Run: `python bench/bench_cli_scale.py [--sizes 1000,10000] [--variants lines,json,export,json+export]
[--distinct 200] [--export-kinds mask]` (about 5 minutes at the default sizes on 2 cores; add 100000 when asked:
about an hour). The dataset is flat (`imgNNNNN.png` + `imgNNNNN_mask.png`, every 10th without a mask): hard links
to `--distinct` 256x192 images (bench/scale_data.py), the tiny 128x128 model of the tests (tests/support/helpers.py)
run by its card on the embedded backend, the decoded-input cache in a temporary folder (filled by a first,
unmeasured run at the smallest size, whose items link to every distinct image). Each run's stdout goes to a file
(its size is printed: a `--json` document grows with the images, the process must not). `--export` writes
`--export-kinds` (default `mask`: the rasters' own bytes are the disk's, not the process's) into a fresh folder per
run.

Printed per run: images, variant, wall seconds, ms per image, the child's peak RSS (`wait4`'s ru_maxrss), the
stdout bytes; then per variant the slope of the peak RSS between the smallest and the largest size, in bytes per
image. `--baseline DIR` runs each variant also with another SegScope, right after this one (same size, same
cache): DIR holds it as `segscope/` (`mkdir -p DIR/segscope && git archive REV core gui models pipelines resources
| tar -x -C DIR/segscope`), put first on the command's PYTHONPATH, ahead of this worktree's editable install.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scale_data import linked_dataset, write_sources

from segscope.core.profiling.machine import cpu_name

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from helpers import make_tiny_onnx, tiny_card  # noqa: E402  (the tests' tiny model)

SEGSCOPE = Path(sys.executable).with_name("segscope")
VARIANTS = {"lines": [], "json": ["--json"], "export": ["--export"], "json+export": ["--json", "--export"]}


def write_model(folder: Path) -> Path:
    """The tests' tiny 128x128 model and its card (with the AIPP config it names)."""
    folder.mkdir(parents=True)
    make_tiny_onnx(folder / "tiny.onnx", 128)
    card = folder / "tiny.json"
    card.write_text(json.dumps(tiny_card(128)))
    shutil.copy(REPO / "models" / "aipp_unet_simple_opencv.cfg", folder)
    return card


def run_eval(dataset: Path, card: Path, flags: list[str], work: Path, kinds: str,
             env: dict[str, str]) -> tuple[float, int, int]:
    """Seconds, peak RSS in bytes and stdout bytes of one `segscope eval`."""
    command = [str(SEGSCOPE), "eval", "--dataset", str(dataset), "--model", str(card), "--backend", "embedded"]
    for flag in flags:
        if flag == "--export":
            out = work / "export"
            shutil.rmtree(out, ignore_errors=True)
            command += ["--export", str(out), "--export-kinds", kinds]
        else:
            command.append(flag)
    stdout = work / "stdout"
    with open(stdout, "wb") as sink:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=sink, stderr=subprocess.PIPE, env=env)
        assert child.stderr is not None
        errors = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({child.returncode}): {errors.decode()[-2000:]}")
    return seconds, usage.ru_maxrss * 1024, stdout.stat().st_size  # ru_maxrss: KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated image counts")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--distinct", type=int, default=200, help="distinct images the dataset links to")
    parser.add_argument("--export-kinds", default="mask")
    parser.add_argument("--baseline", type=Path, metavar="DIR", help="also run another SegScope, from DIR/segscope")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    variants = [v.strip() for v in args.variants.split(",")]
    print(f"Machine: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} (1 min) before "
          f"the run; sizes {sizes}, {args.distinct} distinct 256x192 images, --export-kinds {args.export_kinds}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="segscope-bench-cli-") as tmp:
        work = Path(tmp)
        card = write_model(work / "model")
        sources = write_sources(work / "sources", args.distinct)
        env = {**os.environ, "SEGSCOPE_CACHE_DIR": str(work / "cache")}
        envs = {"now": env}
        if args.baseline:
            envs["before"] = {**env, "PYTHONPATH": os.pathsep.join([str(args.baseline.resolve()),
                                                                    *filter(None, [env.get("PYTHONPATH")])])}
        datasets = {n: linked_dataset(work / f"d{n}", n, "flat", sources, without_mask_every=10) for n in sizes}
        run_eval(datasets[sizes[0]], card, [], work, args.export_kinds, env)  # fills the cache: items n % distinct
        peaks: dict[tuple[str, str], dict[int, int]] = {}
        print(f"{'images':>8} {'variant':19} {'wall s':>8} {'ms/image':>9} {'peak RSS MB':>12} {'stdout MB':>10}")
        for n in sizes:
            for variant in variants:
                for code, environment in envs.items():
                    seconds, peak, written = run_eval(datasets[n], card, VARIANTS[variant], work, args.export_kinds,
                                                      environment)
                    peaks.setdefault((variant, code), {})[n] = peak
                    print(f"{n:8,} {f'{variant} ({code})':19} {seconds:8.1f} {seconds / n * 1000:9.2f} "
                          f"{peak / 1e6:12.1f} {written / 1e6:10.2f}", flush=True)
        if len(sizes) > 1:
            low, high = sizes[0], sizes[-1]
            for (variant, code), peak in peaks.items():
                slope = (peak[high] - peak[low]) / (high - low)
                print(f"{f'{variant} ({code})':19} peak RSS slope {low:,} -> {high:,} images: {slope:8.0f} bytes "
                      "per image")
    print(f"Load average {os.getloadavg()[0]:.2f} (1 min) after the run")


if __name__ == "__main__":
    main()
