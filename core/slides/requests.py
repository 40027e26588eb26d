"""Streams on region reads: an ROI of a slide read by its reader and sent as the stream's image.

The crop plugin widens the ROI by its expand ratios and clips it to the image; `region_request` reads that
very box (so the stream sees what it would on the whole file), sends it with ROI None (the whole region,
which the plugin neither widens nor clips further), and places the result back in the slide's pixels. With
the opencv decoder this gives the same tensor as decoding the whole file and cropping
(tests/core/test_slides_requests.py), and no backend ever holds more than the region. With a DVPP decoder
the embedded backend refuses region pixels (its NV12 chroma would be shared differently); MindX and the
remote backend still run them, close to but not bit-identical with the whole file's decode.
"""

from __future__ import annotations

import cv2

from ..backends.base import InferenceRequest
from ..errors import SegScopeError
from ..result import Placement
from ..roi import Roi
from ..stream.imaging import crop_box
from .base import SlideReader

NO_EXPAND = (0.0, 0.0, 0.0, 0.0)


def region_box(reader: SlideReader, roi: Roi, expand: tuple[float, float, float, float] = NO_EXPAND) -> Roi:
    """The level-0 box the stream's crop takes for `roi` (core.stream.emulation.expand_ratios gives `expand`)."""
    return crop_box(roi, expand, *reader.size)


def region_request(reader: SlideReader, roi: Roi,
                   expand: tuple[float, float, float, float] = NO_EXPAND) -> InferenceRequest:
    """A request for `roi` (slide pixels) carrying only its pixels; `infer_many` reports the result's ROI and
    image size in slide pixels, as a run on the whole file would. A box outside the slide is a one-line
    error naming the file."""
    box = region_box(reader, roi, expand)
    return InferenceRequest(reader.read_roi(box), None, Placement(box, reader.size))


def mirrored_request(reader: SlideReader, window: Roi) -> InferenceRequest:
    """A request for `window` (slide pixels), which may reach past the slide's edges: the part inside read as
    `region_request` reads it, the part outside the mirror image of the slide at its edge (OpenCV's
    BORDER_REFLECT_101, as the U-Net paper extrapolates a slide's border), the result placed at `window`."""
    inside = window.intersection(Roi.whole(*reader.size))
    if inside is None:
        raise SegScopeError(f"{reader.path}: {window} lies outside the {reader.size[0]}x{reader.size[1]} slide")
    if inside == window:
        return region_request(reader, window)
    pixels = cv2.copyMakeBorder(reader.read_roi(inside), inside.y0 - window.y0, window.y1 - inside.y1,
                                inside.x0 - window.x0, window.x1 - inside.x1, cv2.BORDER_REFLECT_101)
    return InferenceRequest(pixels, None, Placement(window, reader.size))
