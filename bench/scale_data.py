"""Datasets of any size for the scale benchmarks: a few distinct images (256x192, a dark rectangle on bright noise) with
their 0/255 masks, and N items that are hard links to them (a dataset of 100,000 images in seconds and a few MB of
disk), in either layout of `core.dataset`: flat (`imgNNNNN.png` + `imgNNNNN_mask.png`) or one folder per image
(`NNNNN/image.png` + `mask.png`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import cv2
import numpy as np

LAYOUTS = ("flat", "folders")


def write_sources(folder: Path, count: int, size: tuple[int, int] = (256, 192),
                  seed: int = 0) -> list[tuple[Path, Path]]:
    """`count` distinct images and masks in `folder`: each a dark noisy rectangle (the mask's foreground, which the
    tests' tiny model mostly finds) at its own place on bright noise, so predictions and scores differ from image
    to image."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    width, height = size
    sources = []
    for n in range(count):
        image = rng.integers(120, 256, (height, width, 3), dtype=np.uint8)
        mask = np.zeros((height, width), np.uint8)
        x0, y0 = int(rng.integers(0, width * 3 // 4)), int(rng.integers(0, height * 3 // 4))
        x1, y1 = x0 + int(rng.integers(4, width // 4)), y0 + int(rng.integers(4, height // 4))
        image[y0:y1, x0:x1] = rng.integers(0, 140, (y1 - y0, x1 - x0, 3), dtype=np.uint8)
        mask[y0:y1, x0:x1] = 255
        pair = folder / f"source{n}.png", folder / f"source{n}_truth.png"
        cv2.imwrite(str(pair[0]), image)
        cv2.imwrite(str(pair[1]), mask)
        sources.append(pair)
    return sources


def _link(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # a file system without hard links, or a source at its link limit
        shutil.copyfile(source, target)


def linked_dataset(root: Path, count: int, layout: str, sources: list[tuple[Path, Path]],
                   without_mask_every: int = 0) -> Path:
    """`root` holding `count` items in `layout`, item n linked to `sources[n % len(sources)]`; every
    `without_mask_every`-th item (0: none) has no mask."""
    root.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        image, mask = sources[n % len(sources)]
        masked = not without_mask_every or n % without_mask_every
        if layout == "flat":
            _link(image, root / f"img{n:05d}.png")
            if masked:
                _link(mask, root / f"img{n:05d}_mask.png")
        else:
            folder = root / f"{n:05d}"
            folder.mkdir()
            _link(image, folder / "image.png")
            if masked:
                _link(mask, folder / "mask.png")
    return root
