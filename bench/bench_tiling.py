"""Benchmark of tiled whole-slide inference: throughput as a ratio to model-only time on the same tiles.

Run: `python bench/bench_tiling.py [--size 5400x3600] [--tile 1800] [--overlap 0] [--rounds 3]` (a minute or
two with the shipped demo model). A generated pyramidal TIFF (core.slides.synthetic) is tiled at the demo
dataset's ROI size; every figure comes from this one run, the two variants interleaved (A B A B ...):

- model only: `session.run` on each tile's prepared tensor (prepared once, before timing);
- whole slide: `core.wholeslide.evaluate.run_tiled` end to end (region reads, crop, resize, preprocess on the
  read-ahead thread, the model, post-processing, stitching at the model's scale).

ratio = model-only time / whole-slide time (1.0: everything but the model hidden behind it; the issue's goal
is >= 0.9). Each prints its median and spread (min-max). Results are recorded in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from timing import interleaved, paired_ratios, spread

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.profiling.machine import cpu_name
from segscope.core.roi import Roi
from segscope.core.slides import open_slide
from segscope.core.slides.requests import mirrored_request
from segscope.core.slides.synthetic import write_pyramidal_tiff
from segscope.core.stream.pipeline import DEFAULT_PIPELINE
from segscope.core.wholeslide.evaluate import TilePlan, run_tiled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="5400x3600", help="slide WIDTHxHEIGHT (default 5400x3600)")
    parser.add_argument("--tile", type=int, default=1800, help="tile side in slide pixels (default 1800)")
    parser.add_argument("--overlap", type=int, default=0, help="overlap in slide pixels (default 0)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    load = os.getloadavg()[0]
    print(f"Machine: {cpu_name()}, {os.cpu_count()} cores; load average {load:.2f} (1 min) before the run")
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBackend(DEFAULT_PIPELINE) as backend:
        path = write_pyramidal_tiff(Path(tmp) / "slide.tif", (width, height), tile=512)
        plan = TilePlan((args.tile, args.tile), args.overlap)
        with open_slide(path) as reader:
            grid = plan.grid(Roi.whole(*reader.size), reader.size)  # the tiles run_tiled reads, mirrored past the edge
            tensors = [backend.prepare(mirrored_request(reader, tile).image).tensor for tile in grid.tiles]
            session, name = backend.session, backend.stream.card.input_name
            assert session is not None

            def model_only() -> None:
                for tensor in tensors:
                    session.run(None, {name: tensor})

            def whole_slide() -> None:
                run_tiled(backend, reader, plan)

            times = interleaved({"model only": model_only, "whole slide": whole_slide}, args.rounds)
    print(f"{width}x{height} pyramidal TIFF (JPEG tiles), {len(grid)} tiles of {args.tile} px, overlap "
          f"{args.overlap} px, model {backend.capabilities.input_size[0]} px, {backend.capabilities.device}")
    for variant, values in times.items():
        print(f"  {variant:<12} {spread(values)}  ({statistics.median(values) / len(grid) * 1000:.0f} ms/tile)")
    print(f"  throughput ratio (model only / whole slide, per round): "
          f"{paired_ratios(times['model only'], times['whole slide'])}; goal >= 0.9")
    print(f"Load average {os.getloadavg()[0]:.2f} (1 min) after the run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
