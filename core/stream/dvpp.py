"""The DVPP (Ascend media hardware) path of the decoder, crop and resize plugins, approximated on the CPU.

With `cvProcessor` "ascend" (the SDK default) `mxpi_imagedecoder` decodes JPEG with DVPP into YUV420SP
NV12 whose strides are aligned (width to 16, height to 2: VPC_STRIDE_WIDTH/HEIGHT in VisionSDK
MxpiImageDecoder.cpp); the ascend crop and resize work on those planes, and the model's AIPP converts
NV12 to RGB with its `csc_switch` matrix (core.stream.aipp). DVPP's JPEG decoder and scaler are hardware; this
module approximates them: OpenCV decode, full-range BT.601 YUV (what a JPEG holds), 2x2-averaged chroma,
and `cv2.resize` per plane with the element's `interpolation`.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from ..errors import SegScopeError
from ..roi import Roi
from .imaging import DVPP_INTERPOLATION

WIDTH_ALIGN, HEIGHT_ALIGN = 16, 2
#: Shown where a stream uses DVPP, whatever its model: how close the approximation comes depends on the model
#: and the images. (With the demo model on the 8 demo slides, the DVPP stream with AIPP's JPEG CSC against the
#: shipped OpenCV stream: probabilities 4e-5 apart on average, 0.2 at most at defect edges, class maps equal
#: on 99.99% of pixels; tests/core/test_streams.py re-measures one slide.)
NOTE = ("DVPP's JPEG decoder and resizer are approximated on the CPU (OpenCV decode, NV12, cv2.resize per "
        "plane): expect small differences from the Ascend host's probabilities, most at object edges; "
        "measure them on a few of your images with segscope compare before trusting small differences")


def align(value: int, to: int) -> int:
    return (value + to - 1) // to * to


@dataclass(frozen=True)
class Nv12:
    """A YUV420SP picture as DVPP leaves it: `y` is stride-high x stride-wide, `uv` half that, U then V."""

    y: np.ndarray
    uv: np.ndarray
    width: int
    height: int

    @property
    def size(self) -> tuple[int, int]:
        return self.width, self.height

    def yuv444(self) -> np.ndarray:
        """H x W x 3 YUV, the chroma repeated 2x2: what AIPP reads from YUV420SP input."""
        uv = self.uv.repeat(2, axis=0).repeat(2, axis=1)
        return np.dstack([self.y[: self.height, : self.width], uv[: self.height, : self.width]])


def _planes(yuv: np.ndarray, width: int, height: int) -> Nv12:
    """NV12 with aligned strides from an H x W x 3 YUV444 image (edges repeated into the stride padding)."""
    stride_w, stride_h = align(width, WIDTH_ALIGN), align(height, HEIGHT_ALIGN)
    padded = cv2.copyMakeBorder(yuv, 0, stride_h - height, 0, stride_w - width, cv2.BORDER_REPLICATE)
    chroma = cv2.resize(padded[..., 1:], (stride_w // 2, stride_h // 2), interpolation=cv2.INTER_AREA)
    return Nv12(np.ascontiguousarray(padded[..., 0]), chroma, width, height)


def decode(bgr: np.ndarray) -> Nv12:
    """The DVPP decoder's NV12 for an image OpenCV decoded (JPEG's full-range BT.601 YCbCr)."""
    y_cr_cb = cv2.cvtColor(bgr, cv2.COLOR_BGR2YCrCb)  # JPEG's YCbCr (COLOR_BGR2YUV is analogue PAL YUV)
    return _planes(y_cr_cb[..., [0, 2, 1]], bgr.shape[1], bgr.shape[0])


def crop(image: Nv12, roi: Roi, source: str) -> tuple[Nv12, Roi]:
    """The ascend crop of `roi`: x0/y0 down to even, x1/y1 clipped, sizes even (VPC works on 2x2 chroma)."""
    x0, y0 = roi.x0 // 2 * 2, roi.y0 // 2 * 2
    x1 = x0 + (min(roi.x1, image.width) - x0) // 2 * 2
    y1 = y0 + (min(roi.y1, image.height) - y0) // 2 * 2
    if x0 < 0 or y0 < 0 or x1 - x0 < 32 or y1 - y0 < 6 or x1 - x0 > 4096 or y1 - y0 > 4096:
        raise SegScopeError(f"{source}: ROI {roi} does not give a 32..4096 x 6..4096 crop of the "
                            f"{image.width}x{image.height} image (the ascend crop's limits, error 2001)")
    yuv = image.yuv444()[y0:y1, x0:x1]
    return _planes(yuv, x1 - x0, y1 - y0), Roi(x0, y0, x1, y1)


def resize(image: Nv12, size: tuple[int, int], interpolation: int) -> Nv12:
    """The VPC resize (Resizer_Stretch) of both planes to `size` (even)."""
    width, height = size
    if width % 2 or height % 2:
        raise SegScopeError(f"the DVPP resize needs an even output size, got {width}x{height}")
    flag = DVPP_INTERPOLATION.get(interpolation, cv2.INTER_LINEAR)
    y = cv2.resize(image.y[: image.height, : image.width], size, interpolation=flag)
    uv = cv2.resize(image.uv[: image.height // 2, : image.width // 2], (width // 2, height // 2),
                    interpolation=flag)
    stride_w, stride_h = align(width, WIDTH_ALIGN), align(height, HEIGHT_ALIGN)
    y = cv2.copyMakeBorder(y, 0, stride_h - height, 0, stride_w - width, cv2.BORDER_REPLICATE)
    uv = cv2.copyMakeBorder(uv, 0, (stride_h - height) // 2, 0, (stride_w - width) // 2, cv2.BORDER_REPLICATE)
    return Nv12(y, uv, width, height)
