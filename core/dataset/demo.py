"""Deterministic synthetic industrial-inspection slides: the demo dataset and the demo model's training data.

A slide is a textured surface (brushed metal, cast grain or woven fabric) under uneven light, with
scratches, cracks, spots and pits drawn on it; `mask.png` is the exact defect footprint (255 = defect).
Most defects lie in the original script's fixed ROI so the default view shows them; one slide in six
(ids 003, 009, ...) has none. Each slide depends only on (seed, index), so the same seed always gives
byte-identical files and a longer dataset starts with the same slides as a shorter one.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np

from ..compat import pairwise
from ..errors import SegScopeError
from ..files.fileio import staging_folder, write_image
from ..roi import ORIGINAL_DEFAULT_ROI, Roi

#: The size (width, height) of the original project's slides.
DEFAULT_SIZE = (4000, 3000)

#: Share of defects placed inside `defect_region`; the rest go anywhere on the slide.
IN_REGION_SHARE = 0.85


def defect_region(size: tuple[int, int]) -> Roi:
    """The original default ROI scaled to a slide of `size` (exactly that ROI at 4000x3000)."""
    w, h = size
    x0, y0, x1, y1 = ORIGINAL_DEFAULT_ROI
    dw, dh = DEFAULT_SIZE
    return Roi(x0 * w // dw, y0 * h // dh, x1 * w // dw, y1 * h // dh)


def has_defects(index: int) -> bool:
    """Whether the dataset's slide at 0-based `index` gets defects (one in six does not)."""
    return index % 6 != 2


# --- surfaces -----------------------------------------------------------------------------------------


def _upsampled_noise(rng: np.random.Generator, shape: tuple[int, int], cell: float) -> np.ndarray:
    """Smooth unit noise with features about `cell` pixels wide, made small and upsampled (fast)."""
    h, w = shape
    small = rng.standard_normal((max(2, int(h / cell) + 2), max(2, int(w / cell) + 2)), dtype=np.float32)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


def _brushed(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Fine streaks along x (or y): noise stretched along the brushing direction, plus slow waviness."""
    h, w = shape
    vertical = rng.random() < 0.3
    if vertical:
        h, w = w, h
    stretch = rng.uniform(15, 60)
    streaks = rng.standard_normal((h, max(2, int(w / stretch))), dtype=np.float32)
    streaks = np.asarray(cv2.resize(streaks, (w, h), interpolation=cv2.INTER_LINEAR), np.float32)
    streaks = np.asarray(cv2.GaussianBlur(streaks, (1, 3), 0), np.float32)
    surface = streaks + 0.6 * _upsampled_noise(rng, (h, w), rng.uniform(40, 120))
    return surface.T.copy() if vertical else surface


def _grain(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Cast / sand-blasted grain: noise at several scales."""
    surface = rng.standard_normal(shape, dtype=np.float32)
    surface = cv2.GaussianBlur(surface, (3, 3), 0) * 1.8
    for cell, weight in ((4, 0.8), (16, 0.3), (90, 0.8)):
        surface += weight * _upsampled_noise(rng, shape, cell * rng.uniform(0.7, 1.4))
    return surface


def _fabric(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Woven fabric / fibre mat: a crossed thread pattern with irregular threads."""
    h, w = shape
    period = rng.uniform(5, 14)
    x = np.arange(w, dtype=np.float32) * (2 * np.pi / period)
    y = np.arange(h, dtype=np.float32) * (2 * np.pi / period * rng.uniform(0.9, 1.1))
    weave = np.multiply.outer(np.cos(y), np.cos(x)) + 0.4 * np.add.outer(np.cos(2 * y), np.cos(2 * x))
    return weave + 0.5 * _upsampled_noise(rng, shape, 3) + 0.5 * _upsampled_noise(rng, shape, 60)


#: Surface generators by name; `make_slide` picks one at random unless told.
SURFACES: dict[str, Callable[[np.random.Generator, tuple[int, int]], np.ndarray]] = {
    "brushed": _brushed,
    "grain": _grain,
    "fabric": _fabric,
}


def _illumination(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """A tilted light gradient times radial vignetting, computed coarse and upsampled."""
    h, w = shape
    gh, gw = max(2, h // 16), max(2, w // 16)
    y, x = np.mgrid[0:gh, 0:gw].astype(np.float32)
    x, y = x / gw - 0.5, y / gh - 0.5
    angle = rng.uniform(0, 2 * np.pi)
    light = 1 + rng.uniform(0.05, 0.35) * (x * np.cos(angle) + y * np.sin(angle))
    cx, cy = rng.uniform(-0.2, 0.2, 2)
    light *= 1 - rng.uniform(0.05, 0.4) * ((x - cx) ** 2 + (y - cy) ** 2) / 0.5
    return cv2.resize(light, (w, h), interpolation=cv2.INTER_LINEAR)


# --- defects ------------------------------------------------------------------------------------------


def _random_walk(
    rng: np.random.Generator,
    start: np.ndarray,
    angle: float,
    length: float,
    step: float,
    turn: float,
    bend: float,
) -> np.ndarray:
    """Points of a path of `length` px: each step turns by `bend` plus up to `turn` rad of jitter."""
    n = max(2, int(length / step))
    angles = angle + np.cumsum(bend + rng.uniform(-turn, turn, n))
    steps = step * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    return np.vstack([start, start + np.cumsum(steps, axis=0)])


def _stroke(canvas: np.ndarray, points: np.ndarray, widths: np.ndarray) -> None:
    """Draw a polyline whose segment i has thickness widths[i] (rounded joints, so no gaps)."""
    pts = np.round(points).astype(np.int32)
    for (a, b), width in zip(pairwise(pts), widths):
        cv2.line(canvas, tuple(int(v) for v in a), tuple(int(v) for v in b), 255, max(1, round(width)))


def _scratch(rng: np.random.Generator, canvas: np.ndarray, centre: np.ndarray, scale: float) -> float:
    length = rng.uniform(400, 1800) * scale
    points = _random_walk(
        rng, np.zeros(2), rng.uniform(0, 2 * np.pi), length, 12 * scale, 0.03, rng.uniform(-0.02, 0.02)
    )
    points += centre - points.mean(axis=0)
    n = len(points) - 1
    width = rng.uniform(5, 13) * scale
    widths = width * (0.75 + 0.25 * np.sin(np.linspace(0, rng.uniform(2, 9), n) + rng.uniform(0, 6)))
    widths[[0, -1]] *= 0.7  # tapered ends
    _stroke(canvas, points, np.maximum(widths, 3))
    return 0.25 * width  # edge softness (Gaussian sigma), well under half the width so the footprint holds


def _crack(rng: np.random.Generator, canvas: np.ndarray, centre: np.ndarray, scale: float) -> float:
    width = rng.uniform(5, 10) * scale
    length = rng.uniform(400, 1400) * scale
    trunk = _random_walk(rng, np.zeros(2), rng.uniform(0, 2 * np.pi), length, 18 * scale, 0.7, 0.0)
    trunk += centre - trunk.mean(axis=0)
    n = len(trunk) - 1
    _stroke(canvas, trunk, np.maximum(width * np.linspace(1.0, 0.6, n), 4))
    for i in rng.choice(np.arange(1, n), size=min(n - 1, int(rng.integers(1, 4))), replace=False):
        direction = np.arctan2(*(trunk[i + 1] - trunk[i])[::-1]) + rng.choice([-1, 1]) * rng.uniform(0.4, 1.2)
        branch = _random_walk(rng, trunk[i], direction, rng.uniform(0.2, 0.5) * length, 15 * scale, 0.7, 0.0)
        _stroke(canvas, branch, np.maximum(0.7 * width * np.linspace(1.0, 0.5, len(branch) - 1), 4))
    return 0.25 * width


def _blob(rng: np.random.Generator, canvas: np.ndarray, centre: np.ndarray, scale: float) -> float:
    """An irregular ellipse (stain, spot, dent): radius wobbles with the angle."""
    radius = rng.uniform(40, 180) * scale
    aspect = rng.uniform(0.45, 1.0)
    theta = np.linspace(0, 2 * np.pi, 90, endpoint=False)
    wobble = 1 + sum(rng.uniform(0, 0.12) * np.sin(k * theta + rng.uniform(0, 6)) for k in (2, 3, 5))
    rot = rng.uniform(0, np.pi)
    x, y = radius * wobble * np.cos(theta), aspect * radius * wobble * np.sin(theta)
    pts = centre + np.stack([x * np.cos(rot) - y * np.sin(rot), x * np.sin(rot) + y * np.cos(rot)], axis=1)
    cv2.fillPoly(canvas, [np.round(pts).astype(np.int32)], 255)
    return rng.uniform(0.04, 0.15) * aspect * radius


def _pit(rng: np.random.Generator, canvas: np.ndarray, centre: np.ndarray, scale: float) -> float:
    """A small round pit or pore."""
    radius = max(5.0, rng.uniform(12, 32) * scale)
    axes = (round(radius), round(radius * rng.uniform(0.75, 1.0)))
    c = tuple(int(v) for v in np.round(centre))
    cv2.ellipse(canvas, c, axes, rng.uniform(0, 180), 0, 360, 255, -1)
    return 0.15 * radius


#: (draw function, relative frequency, half-size of its drawing window at scale 1, chance of being darker)
_DEFECTS = (
    (_scratch, 0.3, 1100, 0.35),
    (_crack, 0.25, 1100, 1.0),
    (_blob, 0.3, 260, 0.7),
    (_pit, 0.15, 70, 0.9),
)


def _add_defect(
    rng: np.random.Generator,
    gray: np.ndarray,
    mask: np.ndarray,
    centre: np.ndarray,
    scale: float,
    texture_sigma: float,
) -> None:
    """Draw one random defect around `centre` into `gray` (float, in place) and its footprint into `mask`."""
    h, w = gray.shape
    kind = rng.choice(len(_DEFECTS), p=[d[1] for d in _DEFECTS])
    draw, _, reach, dark = _DEFECTS[kind]
    half = int(reach * scale) + 8
    cx, cy = (int(v) for v in centre)
    x0, y0, x1, y1 = max(0, cx - half), max(0, cy - half), min(w, cx + half), min(h, cy + half)
    if x1 <= x0 or y1 <= y0:
        return
    footprint = np.zeros((y1 - y0, x1 - x0), np.uint8)
    softness = draw(rng, footprint, centre - (x0, y0), scale)
    if not footprint.any():
        return
    alpha = cv2.GaussianBlur(footprint.astype(np.float32) / 255, (0, 0), max(0.5, softness))
    low_contrast = rng.random() < 0.2
    contrast = texture_sigma * (rng.uniform(4.0, 5.5) if low_contrast else rng.uniform(6.0, 12.0))
    sign = -1 if rng.random() < dark else 1
    # Inner mottling so large defects are not flat; never below 55% of the contrast.
    mottle = 0.85 + 0.15 * np.clip(_upsampled_noise(rng, alpha.shape, 20 * scale + 2), -2, 2)
    gray[y0:y1, x0:x1] += (sign * contrast) * alpha * mottle
    mask[y0:y1, x0:x1] |= footprint


def make_slide(
    rng: np.random.Generator,
    size: tuple[int, int] = DEFAULT_SIZE,
    with_defects: bool = True,
    surface: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One slide of `size` (width, height): (H x W x 3 BGR uint8 image, H x W uint8 mask of 0/255).

    `surface` names one of `SURFACES` (random when None).
    """
    w, h = size
    if w < 16 or h < 16:
        raise SegScopeError(f"demo slide size {w}x{h}: both sides must be at least 16 pixels")
    scale = min(w / DEFAULT_SIZE[0], h / DEFAULT_SIZE[1])
    half = (max(8, h // 2), max(8, w // 2))
    if surface is None:
        surface = list(SURFACES)[rng.integers(len(SURFACES))]
    texture = SURFACES[surface](rng, half)
    texture_sigma = rng.uniform(5, 14)
    level = rng.uniform(90, 175)
    gray = level * _illumination(rng, half) + texture_sigma * texture / (texture.std() + 1e-6)
    gray = cv2.resize(gray, (w, h), interpolation=cv2.INTER_LINEAR)

    mask = np.zeros((h, w), np.uint8)
    if with_defects:
        region = defect_region(size)
        mx, my = region.width // 10, region.height // 10  # keep region defects off its edges
        count = int(rng.choice([1, 2, 2, 3, 3, 4]))
        for i in range(count):
            if i == 0 or rng.random() < IN_REGION_SHARE:
                centre = rng.uniform((region.x0 + mx, region.y0 + my), (region.x1 - mx, region.y1 - my))
            else:
                centre = rng.uniform((0, 0), (w, h))
            _add_defect(rng, gray, mask, centre, scale, texture_sigma)

    gray += rng.uniform(1.0, 3.0) * rng.standard_normal((h, w), dtype=np.float32)  # sensor noise
    tint = 1 + (rng.uniform(-0.08, 0.08, 3) if rng.random() < 0.6 else rng.uniform(-0.015, 0.015, 3))
    image = cv2.merge([cv2.convertScaleAbs(gray, alpha=float(g)) for g in tint])
    return image, mask


def generate_demo_dataset(
    out_dir: Path,
    count: int = 8,
    seed: int = 0,
    size: tuple[int, int] = DEFAULT_SIZE,
    overwrite: bool = False,
) -> list[Path]:
    """Write `out_dir/<id>/image.png` + `mask.png` for ids 001..count; return the slide folders.

    Refuses (before writing anything) to replace existing files unless `overwrite`.
    """
    out_dir = Path(out_dir)
    if count < 1:
        raise SegScopeError(f"demo dataset count {count}: must be at least 1")
    folders = [out_dir / f"{i + 1:03d}" for i in range(count)]
    if not overwrite:
        for folder in folders:
            for name in ("image.png", "mask.png"):
                if (folder / name).exists():
                    raise SegScopeError(f"{folder / name}: already exists (use --overwrite to replace it)")

    def write_slide(index: int) -> None:
        surface = list(SURFACES)[index % len(SURFACES)]  # every kind of surface in a short dataset
        image, mask = make_slide(np.random.default_rng([seed, index]), size, has_defects(index), surface)
        write_image(folders[index] / "image.png", image, overwrite)
        write_image(folders[index] / "mask.png", mask, overwrite)

    # OpenCV and PNG encoding release the GIL, so two slides at a time use two cores.
    with ThreadPoolExecutor(max_workers=min(2, count)) as pool:
        list(pool.map(write_slide, range(count)))
    return folders


#: How many slides the viewer's first start generates (`ensure_demo_dataset`).
VIEWER_DEMO_COUNT = 8


def has_demo_dataset(target: Path) -> bool:
    return (target / "001" / "image.png").is_file()


def ensure_demo_dataset(target: Path, count: int = VIEWER_DEMO_COUNT) -> Path:
    """`target` holding the demo dataset, generated unless it is there: made in a `fileio.staging_folder`, then
    renamed into place, so an interrupted first start never leaves half a dataset behind, nor debris after the
    next start. A folder that cannot be written is said as such (a full disk, a read-only folder)."""
    if has_demo_dataset(target):
        return target
    try:
        with staging_folder(target.parent) as staging:
            made = staging / target.name
            generate_demo_dataset(made, count=count)
            if target.exists():  # a partial folder from an older version: replace it
                shutil.rmtree(target)
            made.rename(target)
    except OSError as exc:
        raise SegScopeError(f"{target}: cannot write the demo dataset here ({exc.strerror or exc}); free some space "
                            "or open a dataset folder of your own (File > Open dataset…)") from None
    return target
