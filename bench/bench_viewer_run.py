"""Benchmark of a viewer run on an already open 16k x 16k slide, as a ratio to the model time alone.

Run: `python bench/bench_viewer_run.py [--side 16384] [--rounds 5] [--with-file]` (about a minute with the
shipped demo model; `--with-file` adds the old path, a minute more). A demo slide tiled to SIDE x SIDE is
written as image.png + mask.png (a one-image dataset) and held in memory as the viewer holds it after its
one decode (an `ImageSlide` and the loaded mask). Variants interleaved (A B A B ...), each the viewer's run
call (`evaluate_dataset` on the shown image's ROI, as gui/runtime/run_controller.py makes it):

- model only: `session.run` on the ROI's prepared tensor (prepared once, before timing);
- viewer run: the ROI read from the open slide (`region_request`) and scored on the held mask: no decode;
- file run (`--with-file`): the image and mask files decoded for the run, as before the viewer held them.

ratio = viewer run / model only (the issue's goal: <= 1.2). Medians with their spread, CPU named.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
from timing import interleaved, paired_ratios, spread

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.dataset.dataset import Dataset
from segscope.core.dataset.demo import make_slide
from segscope.core.evaluate import evaluate_dataset
from segscope.core.files.fileio import read_mask
from segscope.core.profiling.machine import cpu_name
from segscope.core.roi import Roi
from segscope.core.slides.opencv_reader import ImageSlide
from segscope.core.slides.requests import region_request
from segscope.core.stream.emulation import expand_ratios
from segscope.core.stream.loader import load_pipeline
from segscope.core.stream.pipeline import DEFAULT_PIPELINE


def write_slide(folder: Path, side: int) -> None:
    """A demo slide (with defects) tiled to side x side: image.png and mask.png (fast PNG compression)."""
    image, mask = make_slide(np.random.default_rng(3))
    reps = (-(-side // image.shape[0]), -(-side // image.shape[1]))
    folder.mkdir(parents=True)
    png = [cv2.IMWRITE_PNG_COMPRESSION, 1]
    assert cv2.imwrite(str(folder / "image.png"), np.tile(image, (*reps, 1))[:side, :side], png)
    assert cv2.imwrite(str(folder / "mask.png"), np.tile(mask, reps)[:side, :side], png)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=16384, help="slide side in pixels (default 16384)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--with-file", action="store_true", help="also time the run that decodes the files")
    args = parser.parse_args()
    print(f"Machine: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} (1 min) before")
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBackend(DEFAULT_PIPELINE) as backend:
        write_slide(Path(tmp) / "slide", args.side)
        dataset = Dataset.open(Path(tmp))
        item = dataset.items[0]
        side = args.side
        roi = Roi(side // 2 - 900, side // 2 - 900, side // 2 + 900, side // 2 + 900)
        reader = ImageSlide(item.image_path, cv2.imread(str(item.image_path)))  # the viewer's one decode
        mask = read_mask(item.truth_path) if item.truth_path else None
        assert mask is not None
        expand = expand_ratios(load_pipeline(DEFAULT_PIPELINE))
        tensor = backend.prepare(region_request(reader, roi, expand).image).tensor
        session, name = backend.session, backend.stream.card.input_name
        assert session is not None

        def viewer_run(held: bool) -> Callable[[], object]:
            sources = {item.id: lambda box: region_request(reader, box, expand)} if held else None
            masks = {item.id: mask} if held else None
            return lambda: list(evaluate_dataset(backend, dataset, items=[item], rois={item.id: roi},
                                                 sources=sources, masks=masks))

        variants: dict[str, Callable[[], object]] = {
            "model only": lambda: session.run(None, {name: tensor}),
            "viewer run": viewer_run(True),
        }
        if args.with_file:
            variants["file run"] = viewer_run(False)
        times = interleaved(variants, args.rounds)
    print(f"{side}x{side} slide held in memory (as the viewer holds it), ROI {roi.width}x{roi.height} -> model "
          f"{backend.capabilities.input_size[0]} px, {backend.capabilities.device}")
    for variant, values in times.items():
        print(f"  {variant:<11} {spread(values, 1000.0, 'ms', 1)}")
    print(f"  viewer run / model only (per round): {paired_ratios(times['viewer run'], times['model only'])}; "
          "goal <= 1.2")
    if args.with_file:
        speedup = statistics.median(times["file run"]) / statistics.median(times["viewer run"])
        print(f"  file run / viewer run: {speedup:.1f}x")
    print(f"Load average {os.getloadavg()[0]:.2f} (1 min) after the run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
