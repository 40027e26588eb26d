"""Tiled inference over a region of a slide (or all of it): the tile grid, blending weights and the stitcher.

The U-Net paper's overlap-tile strategy (Ronneberger et al. 2015): a model answers the outer band of what it
sees (its edge effect) differently from the same pixels seen with context around them, so each tile's outer
`margin` slide pixels count for nothing, neighbours overlap by at least twice that, and the grid covers the
region widened by `margin` on every side, the part past the slide's own edges read as its mirror image
(`core.slides.requests.mirrored_request`). Every pixel of the region is then counted only by tiles that saw
it with context; with `margin` 0 the tiles are plain (inside the slide, counted to their edges).

A region is covered by a grid of equal tiles (`tile_grid`), `overlap` slide pixels shared by neighbours; the
last tile of a row or column is shifted inward rather than shrunk, so every tile is the same size wherever
the slide allows. Each tile's probabilities (model resolution) are resized to the tile's footprint at the
output scale and accumulated, weighted (`blend_weights`: 0 over the margin, a blend over the rest of the
overlap), into float32 canvases; `finish` divides by the summed weights, so the blended weights sum to one
wherever a tile counted, and takes the argmax after blending. Output pixel (i, j) covers slide pixels
`region.x0 + j / scale ...` (`to_slide`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from ..errors import SegScopeError
from ..result import InferenceResult, decide
from ..roi import Roi

BLENDS = ("linear", "gaussian")
#: Canvases larger than this are refused (the stitched probabilities, weights and seams maps together).
DEFAULT_MAX_CANVAS_BYTES = 4 << 30
#: Tiles one region may take; more is refused before any tile is read (`--max-tiles` raises it).
DEFAULT_MAX_TILES = 20_000
#: MONAI's sliding-window Gaussian: sigma = this times the tile side; weights below `GAUSSIAN_FLOOR` are
#: raised to it so a tile's own corner still counts where no neighbour covers (a slide's corners).
GAUSSIAN_SIGMA_SCALE = 0.125
GAUSSIAN_FLOOR = 1e-3
#: A tile's edge effect as a share of its side: 2/15, 128 px of the demo model's 960 px input. Measured against
#: the same network run on a whole slide at once (tests/core/test_tiling_seams.py): a tile's probabilities
#: differ by over 0.5 within 44 px of its edge, by over 0.01 within 126 px (industrial demo slides; 96 px on
#: the pale synthetic slide of core.slides.synthetic) and not at all from 157 px, its receptive field.
EDGE_EFFECT = (2, 15)


def edge_margin(tile: tuple[int, int]) -> int:
    """Slide pixels of a tile's edge effect: `EDGE_EFFECT` of its longer side, rounded up, at most a quarter of
    its shorter side (a tile clipped to a narrow slide still advances by half its size)."""
    width, height = tile
    numerator, denominator = EDGE_EFFECT
    return min(-(-max(width, height) * numerator // denominator), min(width, height) // 4)


def _axis_count(length: int, tile: int, overlap: int) -> int:
    return 1 if length <= tile else math.ceil((length - tile) / (tile - overlap)) + 1


def _axis_starts(start: int, length: int, tile: int, overlap: int) -> list[int]:
    """Tile starts along one axis covering [start, start + length): stride tile - overlap, the last one
    ending at the region's end (it may overlap its neighbour by more than `overlap`)."""
    stride = tile - overlap
    return [start + min(i * stride, length - tile) for i in range(_axis_count(length, tile, overlap))]


@dataclass(frozen=True)
class TileGrid:
    """Tiles in slide pixels, row by row: `columns` per row, `rows` rows."""

    tiles: tuple[Roi, ...]
    columns: int
    rows: int

    def __len__(self) -> int:
        return len(self.tiles)

    def neighbours(self, index: int) -> tuple[bool, bool, bool, bool]:
        """Whether tile `index` has a neighbour on its left, top, right, bottom."""
        row, column = divmod(index, self.columns)
        return column > 0, row > 0, column < self.columns - 1, row < self.rows - 1


def tile_grid(region: Roi, tile: tuple[int, int], overlap: int, slide_size: tuple[int, int],
              max_tiles: int = DEFAULT_MAX_TILES, margin: int = 0) -> TileGrid:
    """Tiles of `tile` = (width, height) slide pixels covering `region` widened by `margin` (at most half the
    overlap) with `overlap` px shared by neighbours; a region smaller than a tile gets one tile. Tiles are moved
    (shrunk only where the slide is smaller) to reach at most `margin` px past the slide's edges. More than
    `max_tiles` is refused before the grid is built."""
    width, height = tile
    if width <= 0 or height <= 0:
        raise SegScopeError(f"must be a positive number of slide pixels, got {width}x{height}", option="--tile")
    if not 0 <= overlap < min(width, height):
        raise SegScopeError(f"must be at least 0 and less than the tile size "
                            f"({min(width, height)} px), got {overlap}", option="--overlap")
    if not 0 <= 2 * margin <= overlap:
        raise SegScopeError(f"a tile's edge margin of {margin} px must be at least 0 and at most half the overlap "
                            f"({overlap} px)", option="--overlap")
    if not region.fits(*slide_size):
        raise SegScopeError(f"{region} lies outside the {slide_size[0]}x{slide_size[1]} slide", option="--roi")
    wide = Roi(region.x0 - margin, region.y0 - margin, region.x1 + margin, region.y1 + margin)
    count = _axis_count(wide.width, width, overlap) * _axis_count(wide.height, height, overlap)
    if count > max_tiles:
        raise SegScopeError(f"{region.width}x{region.height} slide pixels in {width}x{height} tiles are "
                            f"{count:,} tiles, over the limit of {max_tiles:,}: give a larger --tile, or raise "
                            "--max-tiles", option="--tile")
    xs = _axis_starts(wide.x0, wide.width, width, overlap)
    ys = _axis_starts(wide.y0, wide.height, height, overlap)
    bounds = (slide_size[0] + 2 * margin, slide_size[1] + 2 * margin)  # the slide and its mirrored margins
    tiles = tuple(_shifted(_shifted(Roi(x, y, x + width, y + height), margin).clamped(*bounds), -margin)
                  for y in ys for x in xs)
    return TileGrid(tiles, len(xs), len(ys))


def _shifted(box: Roi, by: int) -> Roi:
    return Roi(box.x0 + by, box.y0 + by, box.x1 + by, box.y1 + by)


def _ramp(size: int, ramp: int, rise: bool, fall: bool, margin: int = 0) -> np.ndarray:
    """0 over `margin` px at both ends, then rising linearly over `ramp` px at the start (`rise`) and falling at
    the end (`fall`), 1 in the middle: (k - margin + 1) / (ramp + 1) at k px from the end, so no weight past the
    margin is 0 and two opposite ramps over one overlap sum to one."""
    weights = np.ones(size, np.float32)
    for distance, ramped in ((np.arange(size), rise), (np.arange(size)[::-1], fall)):
        if ramped and ramp:
            steps = (distance - margin + 1).astype(np.float32) / np.float32(ramp + 1)
            weights = np.minimum(weights, np.clip(steps, 0, 1))
        weights[distance < margin] = 0
    return weights


def _gaussian(size: int) -> np.ndarray:
    centre, sigma = (size - 1) / 2.0, max(size * GAUSSIAN_SIGMA_SCALE, 1e-6)
    weights = np.exp(-0.5 * ((np.arange(size) - centre) / sigma) ** 2)
    return weights / weights.max()


def blend_weights(blend: str, size: tuple[int, int], ramp: int = 0,
                  neighbours: tuple[bool, bool, bool, bool] = (True, True, True, True), margin: int = 0
                  ) -> np.ndarray:
    """H x W float32 weights of a tile footprint of `size` = (width, height): 0 over `margin` px on every side
    (the model's edge effect), all > 0 inside it.

    linear: 1 inside, a linear ramp over `ramp` px past the margin on each side that has a neighbour
    (`neighbours` = left, top, right, bottom), so a lone tile weighs exactly 1 inside its margin; gaussian:
    MONAI's importance map, whatever the neighbours."""
    width, height = size
    if blend == "linear":
        left, top, right, bottom = neighbours
        return np.outer(_ramp(height, ramp, top, bottom, margin), _ramp(width, ramp, left, right, margin))
    if blend == "gaussian":
        weights = np.maximum(np.outer(_gaussian(height), _gaussian(width)), GAUSSIAN_FLOOR).astype(np.float32)
        return weights * np.outer(_ramp(height, 0, False, False, margin), _ramp(width, 0, False, False, margin))
    raise SegScopeError(f"choose from {', '.join(BLENDS)}, got {blend!r}", option="--blend")


def _to_out(value: float, scale: float) -> int:
    return int(math.floor(value * scale + 0.5))


def output_size(region: Roi, scale: float) -> tuple[int, int]:
    """(width, height) in output pixels of `region` stitched at `scale`."""
    return max(_to_out(region.width, scale), 1), max(_to_out(region.height, scale), 1)


def canvas_bytes(region: Roi, scale: float, num_classes: int, seams: bool = False) -> int:
    """The memory a `Stitcher` of `region` at `scale` needs (probabilities, weights, seams maps, argmax)."""
    width, height = output_size(region, scale)
    planes = num_classes + 1 + (2 if seams else 0)
    return width * height * (planes * 4 + 1)


def stitched_bytes(region: Roi, scale: float, num_classes: int, seams: bool = False) -> int:
    """The memory a finished `Stitched` of `region` at `scale` holds (its `nbytes`: probabilities, classes,
    coverage and seams)."""
    width, height = output_size(region, scale)
    return width * height * (num_classes * 4 + 1 + 1 + (4 if seams else 0))


def fitting_scale(region: Roi, scale: float, num_classes: int, seams: bool = False,
                  max_bytes: int = DEFAULT_MAX_CANVAS_BYTES) -> float:
    """`scale` when its canvases fit `max_bytes`, else the largest scale (to 4 significant digits, rounded
    down) whose canvases do."""
    needed = canvas_bytes(region, scale, num_classes, seams)
    if needed <= max_bytes:
        return scale
    fitting = float(f"{scale * math.sqrt(max_bytes / needed):.4g}")
    while fitting > 0 and canvas_bytes(region, fitting, num_classes, seams) > max_bytes:
        fitting = float(f"{fitting * 0.999:.4g}")
    return fitting


@dataclass(frozen=True)
class Stitched:
    """Blended output at `scale` of `region` (slide pixels): probabilities H x W x C float32, the classes the
    card's rule gives on them (`threshold`: `core.result.decide`) uint8, seams (max - min of the foreground
    probability over the tiles covering each pixel) or None, and `covered` (a pixel some tile reached)."""

    region: Roi
    scale: float
    slide_size: tuple[int, int]
    probabilities: np.ndarray
    argmax: np.ndarray
    seams: np.ndarray | None
    covered: np.ndarray
    threshold: float | None = None

    @property
    def nbytes(self) -> int:
        """The memory its arrays hold."""
        return sum(a.nbytes for a in (self.probabilities, self.argmax, self.covered, self.seams) if a is not None)

    def to_slide(self, box: Roi) -> tuple[float, float, float, float]:
        """A box of output pixels as slide pixels (x0, y0, x1, y1), fractional where the scale is."""
        r, s = self.region, self.scale
        return (r.x0 + box.x0 / s, r.y0 + box.y0 / s, r.x0 + box.x1 / s, r.y0 + box.y1 / s)

    def from_slide(self, box: Roi) -> Roi:
        """The output pixels covering a box of slide pixels (clipped to the output)."""
        height, width = self.argmax.shape
        x0, y0 = _to_out(box.x0 - self.region.x0, self.scale), _to_out(box.y0 - self.region.y0, self.scale)
        x1, y1 = _to_out(box.x1 - self.region.x0, self.scale), _to_out(box.y1 - self.region.y0, self.scale)
        return Roi(max(x0, 0), max(y0, 0), min(max(x1, x0 + 1), width), min(max(y1, y0 + 1), height))

    def foreground(self) -> np.ndarray:
        """H x W float32: the probability of any class but the background (0 where no tile reached)."""
        return np.where(self.covered, 1.0 - self.probabilities[..., 0], np.float32(0)).astype(np.float32)

    def crop(self, box: Roi) -> InferenceResult | None:
        """The stitched output under `box` (slide pixels) as a result of that box, at the output scale (what
        the result panels and `image_metrics` take), or None where `box` leaves the stitched region or a
        tile did not reach all of it."""
        if not (self.region.x0 <= box.x0 and self.region.y0 <= box.y0 and box.x1 <= self.region.x1
                and box.y1 <= self.region.y1):
            return None
        out = self.from_slide(box)
        window = (slice(out.y0, out.y1), slice(out.x0, out.x1))
        if not self.covered[window].all():
            return None
        return InferenceResult(self.probabilities[window], self.argmax[window], box, self.slide_size,
                               backend="stitched", threshold=self.threshold)


def check_canvas(region: Roi, scale: float, num_classes: int, seams: bool = False,
                 max_bytes: int = DEFAULT_MAX_CANVAS_BYTES) -> tuple[int, int]:
    """The (width, height) of the canvases stitching `region` at `scale`, refused over `max_bytes`."""
    width, height = output_size(region, scale)
    needed = canvas_bytes(region, scale, num_classes, seams)
    if needed > max_bytes:
        fitting = min(fitting_scale(region, scale, num_classes, seams, max_bytes), 1.0)  # never suggest upscaling
        raise SegScopeError(f"a {width}x{height} output of {num_classes} classes needs "
                            f"{needed:,} bytes, over the limit of {max_bytes:,}: pass --output-scale {fitting:.4g} "
                            "or less, or raise --max-canvas", option="--output-scale")
    return width, height


class Stitcher:
    """Accumulates weighted tile probabilities over `region` at `scale` (output px per slide px), each tile's
    outer `margin` slide px left out (`tile_grid` with the same margin covers the region without them)."""

    def __init__(self, region: Roi, slide_size: tuple[int, int], scale: float, num_classes: int,
                 blend: str = "linear", overlap: int = 0, seams: bool = False,
                 max_bytes: int = DEFAULT_MAX_CANVAS_BYTES, margin: int = 0):
        if not (math.isfinite(scale) and scale > 0):
            raise SegScopeError(f"must be a positive number, got {scale}", option="--output-scale")
        if blend not in BLENDS:
            raise SegScopeError(f"choose from {', '.join(BLENDS)}, got {blend!r}", option="--blend")
        self.region, self.slide_size, self.scale, self.blend = region, slide_size, scale, blend
        # Rounded down: a footprint's rounded edge lies at most that far from the region's (see the tests).
        self.margin = int(math.floor(margin * scale))
        self.ramp = _to_out(overlap - 2 * margin, scale)
        width, height = check_canvas(region, scale, num_classes, seams, max_bytes)
        self._sum = np.zeros((height, width, num_classes), np.float32)
        self._weight = np.zeros((height, width), np.float32)
        self._max = np.full((height, width), -np.inf, np.float32) if seams else None
        self._min = np.full((height, width), np.inf, np.float32) if seams else None
        self.tiles = 0
        self.threshold: float | None = None  # the tiles' (one backend's card: the same for every tile)

    def footprint(self, box: Roi) -> Roi:
        """A slide box's footprint in output pixels (may reach outside the output)."""
        r, s = self.region, self.scale
        return Roi(_to_out(box.x0 - r.x0, s), _to_out(box.y0 - r.y0, s),
                   max(_to_out(box.x1 - r.x0, s), _to_out(box.x0 - r.x0, s) + 1),
                   max(_to_out(box.y1 - r.y0, s), _to_out(box.y0 - r.y0, s) + 1))

    def add(self, result: InferenceResult, neighbours: tuple[bool, bool, bool, bool] = (True, True, True, True)
            ) -> None:
        """Blend one tile's result in, at the footprint of the box it cropped (`result.roi`, slide pixels)."""
        self.threshold = result.threshold
        foot = self.footprint(result.roi)
        size = (foot.width, foot.height)
        probabilities: np.ndarray = result.probabilities.astype(np.float32, copy=False)
        if probabilities.shape[1::-1] != size:
            probabilities = cv2.resize(probabilities, size, interpolation=cv2.INTER_LINEAR)
            if probabilities.ndim == 2:  # cv2 drops a single channel
                probabilities = probabilities[..., None]
        weights = blend_weights(self.blend, size, self.ramp, neighbours, self.margin)
        height, width = self._weight.shape
        x0, y0, x1, y1 = max(foot.x0, 0), max(foot.y0, 0), min(foot.x1, width), min(foot.y1, height)
        if x0 >= x1 or y0 >= y1:
            return
        inner = (slice(y0 - foot.y0, y1 - foot.y0), slice(x0 - foot.x0, x1 - foot.x0))
        out = (slice(y0, y1), slice(x0, x1))
        p, w = probabilities[inner], weights[inner]
        self._sum[out] += p * w[..., None]
        self._weight[out] += w
        if self._max is not None and self._min is not None:  # where this tile counts
            foreground = 1.0 - p[..., 0]
            np.maximum(self._max[out], np.where(w > 0, foreground, -np.inf), out=self._max[out])
            np.minimum(self._min[out], np.where(w > 0, foreground, np.inf), out=self._min[out])
        self.tiles += 1

    def finish(self) -> Stitched:
        """The blended probabilities (0 where no tile reached), the classes the card's rule gives on them (the
        threshold after blending and resizing), and the seams map."""
        covered = self._weight > 0
        probabilities = self._sum
        np.divide(probabilities, self._weight[..., None], out=probabilities, where=covered[..., None])
        seams = None
        if self._max is not None and self._min is not None:
            seams = np.where(covered, self._max - self._min, np.float32(0)).astype(np.float32)
        argmax = decide(probabilities, self.threshold)
        return Stitched(self.region, self.scale, self.slide_size, probabilities, argmax, seams, covered,
                        self.threshold)

