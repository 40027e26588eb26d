"""Sending the ROI crop instead of the whole file, where the host's decode + crop can be reproduced here exactly.

The host's stream decodes the file (mxpi_imagedecoder, opencv: 8-bit BGR) and crops the ROI widened by the
crop plugin's expand ratios (mxpi_imagecrop, dataSource ExternalObjects). For an 8-bit PNG both steps are
exact everywhere (PNG is lossless; libpng gives the same pixels on every host), so the client decodes here,
crops the very box the plugin would, and sends that box as a lossless PNG with the whole crop as its ROI:
the host's decode of the crop gives the pixels its decode of the file would have, and the model sees the
same input (a normalisation before the crop works per pixel, so it commutes with the crop). Anything else
(JPEG, whose decoders differ between libjpeg builds; 16-bit PNG; a DVPP or float32 decoder; a stream with no
crop, before which `core.stream.input` crops an ROI already) travels as the file itself. The crop travels as
`core.backends.base.encode_png` writes it, as already-decoded pixels (a slide region read) do.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2

from ..backends.base import encode_png
from ..cache.decoded import image_region
from ..errors import SegScopeError
from ..files import png
from ..files.fileio import DEFAULT_MAX_PIXELS, checked_size, decode_image
from ..result import Placement
from ..roi import Roi
from ..stream import imaging
from ..stream.emulation import NotEmulated
from ..stream.input import StreamInput

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
@dataclass(frozen=True)
class Crop:
    """An ROI crop to send: its PNG bytes and where it lies in the slide."""

    png: bytes
    placement: Placement


class CropUpload:
    """Crops requests here for one pipeline; `for_pipeline` gives None where that is not exact."""

    def __init__(self, expand: tuple[float, float, float, float], max_pixels: int):
        self.expand = expand
        self.max_pixels = max_pixels

    @classmethod
    def for_pipeline(cls, pipeline: Path, max_pixels: int | None) -> CropUpload | None:
        try:
            stream = StreamInput.of(pipeline)
        except (NotEmulated, SegScopeError):
            return None  # the host may still run it (MindX); the file travels as it is
        if stream.crop is None or not stream.region_reads:  # the one rule: decoded pixels are what it sees
            return None
        return cls(stream.expand, max_pixels or DEFAULT_MAX_PIXELS)

    def placement(self, data: bytes, roi: Roi | None, source: str) -> Placement | None:
        """Where the crop of `roi` lies by the file's header, where that box is the decoder's (an 8-bit PNG with
        no eXIf orientation, the box inside the image within the plugin's limit) and not the whole image; else
        None (`crop` says what travels). Reads the header only."""
        if roi is None or not _eight_bit_png(data) or png.oriented(data):
            return None
        width, height = checked_size(data, source, self.max_pixels)
        box = imaging.crop_box(roi, self.expand, width, height)
        if not imaging.croppable(box, width, height) or (box.width, box.height) == (width, height):
            return None
        return Placement(box, (width, height))

    def png(self, data: bytes, placement: Placement, source: str) -> bytes:
        """The PNG of the crop at `placement` (`placement`'s), its pixels through the decoded-input cache (a
        repeat run decodes nothing here)."""
        pixels = image_region(data, source, placement.box, self.max_pixels)
        assert pixels is not None  # (no eXIf orientation, `placement`: the header's box is the decoder's)
        return encode_png(pixels, source)

    def crop(self, data: bytes, roi: Roi | None, source: str) -> Crop | None:
        """The crop to send for `roi`, or None when the file itself should travel (not an 8-bit PNG, no ROI,
        or a box that is the whole image)."""
        placement = self.placement(data, roi, source)
        if placement is not None:
            return Crop(self.png(data, placement, source), placement)
        if roi is None or not _eight_bit_png(data):
            return None
        width, height = checked_size(data, source, self.max_pixels)
        box = imaging.crop_box(roi, self.expand, width, height)
        if imaging.croppable(box, width, height):
            return None  # the whole image, or an eXIf orientation (the file travels; its decode turns it)
        # A box the plugin checks and clips (outside the image, over its limit): the whole decode, with its errors.
        image = decode_image(data, source, cv2.IMREAD_COLOR, self.max_pixels)
        height, width = image.shape[:2]
        box = imaging.expand_box(roi, self.expand, width, height) if any(self.expand) else roi
        pixels, box = imaging.crop(image, box, source)
        if (box.width, box.height) == (width, height):
            return None
        return Crop(encode_png(pixels, source), Placement(box, (width, height)))


def _eight_bit_png(data: bytes) -> bool:
    return data.startswith(_PNG_SIGNATURE) and len(data) >= 25 and data[24] == 8  # byte 24: the IHDR bit depth
