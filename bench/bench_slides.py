"""Benchmark of whole-slide reading: a pyramidal TIFF read region by region vs a big PNG decoded whole.

Run: `python bench/bench_slides.py [--size 100000] [--png 16000] [--rounds 5] [--tmp DIR]` (a few minutes and
about 1 GB of disk in DIR, the system's temp folder by default). It writes a generated `size` x `size`
pyramidal BigTIFF (JPEG tiles of 512, core.slides.synthetic, tile by tile) and a `png` x `png` PNG of the same
generated slide, then measures, interleaved (A B A B ...): the time to open each (for the PNG that is its
decode: OpenCV reads it whole), one ROI as the stream needs it (the TIFF: open + read the region; the PNG:
decode + crop), and a viewer-sized read on a coarse level. Peak RSS of each case is measured in a fresh
process (VmHWM), since a process's peak never goes down.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from segscope.core.roi import Roi
from segscope.core.slides import open_slide
from segscope.core.slides.synthetic import _Generated, write_pyramidal_tiff

ROI_SIDE = 1800  # the demo dataset's default ROI side


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def centre_roi(size: int) -> Roi:
    x0 = (size - ROI_SIDE) // 2
    return Roi(x0, x0, x0 + ROI_SIDE, x0 + ROI_SIDE)


def write_png(path: Path, side: int) -> None:
    """The generated slide, one band of rows at a time (the array is still whole before encoding)."""
    generated = _Generated(side, side, seed=0)
    image = np.empty((side, side, 3), np.uint8)
    for y in range(0, side, 1024):
        h = min(1024, side - y)
        image[y:y + h] = generated.tile(0, y, side, h, 1.0)
    if not cv2.imwrite(str(path), image, [cv2.IMWRITE_PNG_COMPRESSION, 1]):
        raise SystemExit(f"{path}: could not write the PNG")


def case(name: str, path: Path) -> None:
    """One measured action (also what a child process runs for its peak RSS)."""
    if name == "nothing":  # the baseline: the imports alone
        return
    with open_slide(path, max_pixels=2 ** 40) as slide:
        if name == "open":
            return
        if name == "roi":
            slide.read_roi(centre_roi(slide.size[0]))
        elif name == "overview":  # what a viewer shows first: the level nearest 1024 px across
            level = slide.level_for(slide.size[0] / 1024)
            lv = slide.levels[level]
            slide.read_region(level, 0, 0, min(lv.width, 1024), min(lv.height, 1024))


def peak_rss_mib() -> float:
    """This process's peak RSS: VmHWM (Linux; ru_maxrss keeps the parent's peak across fork + exec there)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2 ** 20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB elsewhere


def child_rss(name: str, path: Path) -> float:
    """Peak RSS in MiB of a fresh process doing `case(name, path)`."""
    out = subprocess.run([sys.executable, __file__, "--child", name, str(path)], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--png", type=int, default=16_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tmp", type=Path, default=None)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        case(args.child[0], Path(args.child[1]))
        print(peak_rss_mib())
        return 0
    sys.path.insert(0, str(Path(__file__).parent))  # bench/ is not a package; the children need none of it
    from bench_core import interleaved, spread

    print(f"Machine: {cpu_name()} ({os.cpu_count()} logical CPUs); load average {os.getloadavg()[0]:.2f} (1 min)")
    with tempfile.TemporaryDirectory(dir=args.tmp) as scratch:
        tiff, png = Path(scratch) / "slide.tif", Path(scratch) / "slide.png"
        start = time.perf_counter()
        write_pyramidal_tiff(tiff, (args.size, args.size), tile=512, compression="jpeg")
        print(f"\nWrote the {args.size}x{args.size} pyramidal BigTIFF (JPEG q90, 512 tiles) in "
              f"{time.perf_counter() - start:.1f} s: {tiff.stat().st_size / 2 ** 20:.0f} MiB")
        start = time.perf_counter()
        write_png(png, args.png)
        print(f"Wrote the {args.png}x{args.png} PNG in {time.perf_counter() - start:.1f} s: "
              f"{png.stat().st_size / 2 ** 20:.0f} MiB")
        with open_slide(tiff) as slide:
            print(f"TIFF levels: {len(slide.levels)}, " + ", ".join(f"{lv.width}" for lv in slide.levels))

        png_rounds = max(2, args.rounds // 2)  # a PNG decode takes seconds
        times = interleaved({f"{n} {k}": (lambda n=n, k=k, p=p: case(k, p))
                             for n, p in (("tiff", tiff), ("png", png)) for k in ("open", "roi", "overview")},
                            png_rounds)
        more = interleaved({f"tiff {k}": (lambda k=k: case(k, tiff)) for k in ("open", "roi", "overview")},
                           args.rounds - png_rounds)
        for name, values in more.items():
            times[name] += values
        print(f"\nSeconds per action, interleaved (ROI {ROI_SIDE}x{ROI_SIDE} at the centre, level 0):")
        for name, values in times.items():
            print(f"  {name:14s} {spread(values)}")
        ratio = np.median(times["png roi"]) / np.median(times["tiff roi"])
        print(f"  one ROI: PNG decode + crop / TIFF open + region read = {ratio:.0f}x")

        print(f"\nPeak RSS of a fresh process (MiB; {child_rss('nothing', tiff):.0f} after the imports alone):")
        for name, path in (("tiff", tiff), ("png", png)):
            for kind in ("open", "roi", "overview"):
                print(f"  {name} {kind:9s} {child_rss(kind, path):8.0f}")
    print(f"\nLoad average {os.getloadavg()[0]:.2f} (1 min) after the run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
