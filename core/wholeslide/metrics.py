"""Slide-scale metrics of a stitched tiled run, with no full-resolution array of the prediction.

The ground truth is sampled (nearest neighbour, as `cv2.resize(..., INTER_NEAREST)` does) to the stitched
output's scale, a band of rows at a time, and scored with `core.metrics.scores`' own definitions: the original soft
Dice on the blended probabilities and per-class hard Dice/IoU on the argmax after blending.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..dataset.masks import mask_to_labels
from ..errors import SegScopeError
from ..metrics.scores import ImageMetrics, hard_metrics, iou_from_dice, soft_dice
from ..roi import Roi
from .tiling import Stitched

#: Slide pixels of ground truth read at once while sampling it to the output scale.
BAND_PIXELS = 64 << 20

ReadBox = Callable[[Roi], np.ndarray]  # a box of the full-resolution mask, slide pixels -> H x W uint8


def _nearest_index(source: int, target: int) -> np.ndarray:
    """OpenCV's INTER_NEAREST source index of each of `target` output pixels: floor(i * (1 / (target / source)))."""
    inverse = 1.0 / (target / source)
    return np.minimum(np.floor(np.arange(target) * inverse).astype(np.int64), source - 1)


def mask_at_scale(read: ReadBox, region: Roi, out_size: tuple[int, int], band_pixels: int = BAND_PIXELS
                  ) -> np.ndarray:
    """The mask over `region` sampled nearest to `out_size` = (width, height), read in bands of rows."""
    width, height = out_size
    xs = _nearest_index(region.width, width)
    ys = _nearest_index(region.height, height)
    out = np.empty((height, width), np.uint8)
    rows_per_band = max(1, band_pixels // max(region.width, 1))
    start = 0
    while start < height:
        stop = start + 1
        while stop < height and ys[stop] - ys[start] < rows_per_band:
            stop += 1
        y0, y1 = int(ys[start]), int(ys[stop - 1]) + 1
        band = read(Roi(region.x0, region.y0 + y0, region.x1, region.y0 + y1))
        out[start:stop] = band[ys[start:stop] - y0][:, xs]
        start = stop
    return out


def array_reader(mask: np.ndarray) -> ReadBox:
    """`ReadBox` of a mask held in memory (slide-sized, H x W)."""
    return lambda box: mask[box.y0:box.y1, box.x0:box.x1]


def truth_at_scale(stitched: Stitched, read: ReadBox, mask_size: tuple[int, int], source: str = "mask"
                   ) -> np.ndarray:
    """The slide's mask (`mask_size` = its width, height) over the stitched region, at its output scale."""
    if mask_size != stitched.slide_size:
        raise SegScopeError(f"{source}: mask is {mask_size[0]}x{mask_size[1]} but the slide is "
                            f"{stitched.slide_size[0]}x{stitched.slide_size[1]}")
    height, width = stitched.argmax.shape
    return mask_at_scale(read, stitched.region, (width, height))


def stitched_metrics(stitched: Stitched, truth: np.ndarray) -> ImageMetrics:
    """Metrics of a stitched output against the mask at its scale (`truth_at_scale`)."""
    classes = stitched.probabilities.shape[-1]
    dice = soft_dice(stitched.probabilities, truth)
    hard = hard_metrics(stitched.argmax, mask_to_labels(truth, classes), classes)
    return ImageMetrics(soft_dice=dice, soft_iou=iou_from_dice(dice), **hard)  # type: ignore[arg-type]


def slide_metrics(stitched: Stitched, read: ReadBox, mask_size: tuple[int, int], source: str = "mask"
                  ) -> ImageMetrics:
    """Metrics of a stitched output against the slide's mask, read through `read`."""
    return stitched_metrics(stitched, truth_at_scale(stitched, read, mask_size, source))
