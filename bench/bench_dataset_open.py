"""Opening a large dataset: `Dataset.open` (one listing per folder, `core.dataset.dataset.discover`) against the
listing it replaced (a `stat` per candidate name, tests/support/listing_reference.py), on generated datasets in
both layouts.

Run: `python bench/bench_dataset_open.py [--images 100000] [--rounds 3]` (about a minute, most of it writing the
datasets: hard links to 16 distinct images, every 10th image without a mask). Each round opens each layout with
each variant, interleaved (A B A B ...), after one warm-up call of each (the folders then in the OS's cache, as on
a second open); printed: median wall seconds (min, max) per variant and the per-round ratio before / now. Both
variants must find the same items, checked once before the rounds.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from pathlib import Path

from scale_data import LAYOUTS, linked_dataset, write_sources
from timing import interleaved, paired_ratios, spread

from segscope.core.dataset.dataset import Dataset
from segscope.core.profiling.machine import cpu_name

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from listing_reference import discover_by_stat  # noqa: E402  (the tests' reference, as the baseline)

NOW, BEFORE = "one listing per folder (now)", "a stat per name (before)"


def _open_by_stat(root: Path) -> Dataset:
    return Dataset(root, discover_by_stat(root))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"Machine: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} (1 min) before "
          f"the run; {args.images:,} images per dataset")
    with tempfile.TemporaryDirectory(prefix="segscope-bench-open-") as tmp:
        sources = write_sources(Path(tmp) / "sources", 16)
        roots = {layout: linked_dataset(Path(tmp) / layout, args.images, layout, sources, without_mask_every=10)
                 for layout in LAYOUTS}
        variants = {}
        for layout, root in roots.items():
            assert Dataset.open(root).items == discover_by_stat(root), f"{layout}: the listings disagree"
            variants[f"{layout}, {NOW}"] = functools.partial(Dataset.open, root)
            variants[f"{layout}, {BEFORE}"] = functools.partial(_open_by_stat, root)
        times = interleaved(variants, args.rounds)
        for name, values in times.items():
            print(f"{name:40} {spread(values)}")
        for layout in LAYOUTS:
            ratios = paired_ratios(times[f"{layout}, {BEFORE}"], times[f"{layout}, {NOW}"])
            print(f"{layout}: before / now per round {ratios}")
    print(f"Load average {os.getloadavg()[0]:.2f} (1 min) after the run")


if __name__ == "__main__":
    main()
