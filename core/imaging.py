"""CPU emulation of the MindX opencv crop and resize plugins.

- `mxpi_imagecrop` (dataSource ExternalObjects): box coordinates are truncated to integers, x1/y1 clipped
  to the image, and opencv crops `[x0, x1) x [y0, y1)`; boxes of 1..8192 px per side are valid.
- `mxpi_imageresize` (opencv): `cv::resize` with INTER_LINEAR. Keep-aspect modes scale the crop and pad
  it (`paddingType`); `ResizePlan` remembers where the content lies so outputs can be mapped back.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from .errors import SegScopeError
from .roi import Roi

OPENCV_CROP_LIMIT = 8192
RESIZE_TYPES = ("Resizer_Stretch", "Resizer_KeepAspectRatio_Fit", "Resizer_KeepAspectRatio_Long",
                "Resizer_OnlyPadding")
PADDING_TYPES = ("Padding_NO", "Padding_RightDown", "Padding_Around")


def crop(image: np.ndarray, roi: Roi, source: str = "image") -> tuple[np.ndarray, Roi]:
    """The opencv crop of `roi` (x1/y1 clipped to the image) and the box actually cropped; errors name `source`."""
    height, width = image.shape[:2]
    box = Roi(roi.x0, roi.y0, min(roi.x1, width), min(roi.y1, height))
    if box.x0 < 0 or box.y0 < 0 or box.x0 >= width or box.y0 >= height or box.width < 1 or box.height < 1:
        raise SegScopeError(f"{source}: ROI {roi} lies outside the {width}x{height} image (crop plugin error 2001)")
    if box.width > OPENCV_CROP_LIMIT or box.height > OPENCV_CROP_LIMIT:
        raise SegScopeError(
            f"{source}: ROI {roi} is {box.width}x{box.height}; the opencv crop plugin accepts at most "
            f"{OPENCV_CROP_LIMIT} px per side: pick a smaller ROI"
        )
    return image[box.y0 : box.y1, box.x0 : box.x1], box


@dataclass(frozen=True)
class ResizeSpec:
    """The props of an `mxpi_imageresize` element that shape its output."""

    width: int
    height: int
    resize_type: str = "Resizer_Stretch"
    padding_type: str = "Padding_RightDown"
    padding_color: tuple[int, int, int] = (0, 0, 0)

    @classmethod
    def from_props(cls, props: dict[str, str], where: str) -> ResizeSpec:
        resize_type = props.get("resizeType", "Resizer_Stretch")
        if resize_type not in RESIZE_TYPES:
            raise SegScopeError(f"{where}: resizeType {resize_type!r} is not supported by the embedded backend "
                                f"(supported: {', '.join(RESIZE_TYPES)})")
        padding_type = props.get("paddingType", "Padding_RightDown")
        if padding_type not in PADDING_TYPES:
            raise SegScopeError(f"{where}: paddingType {padding_type!r} is not one of {', '.join(PADDING_TYPES)}")
        try:
            color = tuple(int(props.get(f"paddingColor{c}", "0")) for c in "BGR")
            return cls(int(props["resizeWidth"]), int(props["resizeHeight"]), resize_type, padding_type,
                       color)  # type: ignore[arg-type]
        except KeyError as exc:
            raise SegScopeError(f"{where}: missing prop {exc.args[0]!r}") from None
        except ValueError:
            raise SegScopeError(f"{where}: paddingColorB/G/R must be integers") from None


@dataclass(frozen=True)
class ResizePlan:
    """Where the resized crop sits inside the output: `content` = (x, y, width, height)."""

    output_size: tuple[int, int]
    content: tuple[int, int, int, int]


def plan_resize(src_width: int, src_height: int, spec: ResizeSpec) -> ResizePlan:
    if spec.resize_type == "Resizer_Stretch":
        return ResizePlan((spec.width, spec.height), (0, 0, spec.width, spec.height))
    if spec.resize_type == "Resizer_OnlyPadding":
        w, h = src_width, src_height
        if w > spec.width or h > spec.height:
            raise SegScopeError(f"Resizer_OnlyPadding: the {w}x{h} crop is larger than {spec.width}x{spec.height}")
    else:
        scale_long = max(spec.width, spec.height) / max(src_width, src_height)
        scale_fit = min(spec.width / src_width, spec.height / src_height)
        # _Long scales the crop's long side to the target's; on a non-square target where the other side
        # would then overflow, it falls back to _Fit's scale (for a square target the two are the same).
        scale = scale_fit if spec.resize_type == "Resizer_KeepAspectRatio_Fit" else min(scale_long, scale_fit)
        w, h = max(1, round(src_width * scale)), max(1, round(src_height * scale))
    if spec.padding_type == "Padding_NO":
        return ResizePlan((w, h), (0, 0, w, h))
    x = (spec.width - w) // 2 if spec.padding_type == "Padding_Around" else 0
    y = (spec.height - h) // 2 if spec.padding_type == "Padding_Around" else 0
    return ResizePlan((spec.width, spec.height), (x, y, w, h))


def resize(image: np.ndarray, spec: ResizeSpec) -> tuple[np.ndarray, ResizePlan]:
    """The resize plugin's output for `image` and the plan that placed it."""
    plan = plan_resize(image.shape[1], image.shape[0], spec)
    x, y, w, h = plan.content
    content = image if (w, h) == image.shape[1::-1] else cv2.resize(image, (w, h), interpolation=cv2.INTER_LINEAR)
    if plan.output_size == (w, h):
        return content, plan
    out_w, out_h = plan.output_size
    canvas = np.empty((out_h, out_w) + image.shape[2:], image.dtype)
    canvas[...] = spec.padding_color[: image.shape[2]] if image.ndim == 3 else spec.padding_color[0]
    canvas[y : y + h, x : x + w] = content
    return canvas, plan


def uncrop_content(array: np.ndarray, plan: ResizePlan) -> np.ndarray:
    """The part of a model output array that covers the crop (drops keep-aspect padding).

    The array may be at another resolution than the model input (e.g. a half-resolution output head).
    """
    x, y, w, h = plan.content
    if plan.content == (0, 0, *plan.output_size):
        return array
    sx, sy = array.shape[1] / plan.output_size[0], array.shape[0] / plan.output_size[1]
    return array[round(y * sy) : round((y + h) * sy), round(x * sx) : round((x + w) * sx)]
