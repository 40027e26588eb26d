"""CPU emulation of the MindX opencv crop and resize plugins (VisionSDK mxPlugins/src/module/).

- `mxpi_imagecrop` (MxpiImageCrop.cpp): box coordinates are truncated to integers, widened by the
  `left/right/up/downExpandRatio` props, x1/y1 clipped to the image, and opencv crops `[x0, x1) x [y0, y1)`;
  boxes of 1..8192 px per side are valid. Its own `resizeHeight/Width` resize the crop like a resize element.
- `mxpi_imageresize` (MxpiImageResize.cpp, OpencvResizeProcess + OpencvPaddingProcess): `cv::resize` with
  its default INTER_LINEAR (the opencv path ignores `interpolation`), sizes computed per `resizeType` in the
  SDK's own integer/float32 arithmetic, then `cv::copyMakeBorder` padding. `ResizePlan` remembers where the
  content lies so outputs can be mapped back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import cv2
import numpy as np

from ..errors import SegScopeError
from ..roi import Roi

OPENCV_CROP_LIMIT = 8192
RESIZE_TYPES = ("Resizer_Stretch", "Resizer_KeepAspectRatio_FastRCNN", "Resizer_KeepAspectRatio_Fit",
                "Resizer_OnlyPadding", "Resizer_KeepAspectRatio_Long", "Resizer_KeepAspectRatio_Short",
                "Resizer_Rescale", "Resizer_Rescale_Double")
#: Valid for MindX, not emulated (their own model-specific rules).
OTHER_RESIZE_TYPES = ("Resizer_MS_Yolov4", "Resizer_PaddleOCR")
SDK_RESIZE_TYPES = RESIZE_TYPES + OTHER_RESIZE_TYPES  # MxpiPluginsUtils.h RESIZETYPE
PADDING_TYPES = ("Padding_NO", "Padding_RightDown", "Padding_Around")
#: Resize types whose Padding_NO the plugin turns into Padding_RightDown (MxpiImageResize::Init).
_ALWAYS_PADDED = ("Resizer_KeepAspectRatio_FastRCNN", "Resizer_KeepAspectRatio_Fit", "Resizer_OnlyPadding")
#: DVPP `interpolation` (plugins.md, mxpi_imageresize): 0/1 bilinear, 2 nearest, 3 bilinear, 4 nearest.
DVPP_INTERPOLATION = {0: cv2.INTER_LINEAR, 1: cv2.INTER_LINEAR, 2: cv2.INTER_NEAREST, 3: cv2.INTER_LINEAR,
                      4: cv2.INTER_NEAREST}
_F32 = np.float32


def processor(props: dict[str, str]) -> str:
    """The element's processor, ascend (DVPP, the default) or opencv: `handleMethod` (legacy) overrides
    `cvProcessor` (MxpiImageResize::InitConfig, the same in the decoder and crop)."""
    return props.get("handleMethod") or props.get("cvProcessor", "ascend")


def expand_box(roi: Roi, ratios: tuple[float, float, float, float], width: int, height: int) -> Roi:
    """The crop box widened by (left, right, up, down) ratios of its size (MxpiImageCrop.cpp, float32 math)."""
    left, right, up, down = (_F32(r) for r in ratios)
    w, h = roi.x1 - roi.x0, roi.y1 - roi.y0
    x0 = int(_F32(roi.x0) - _F32(w) * left) if roi.x0 > _F32(w) * left else 0
    y0 = int(_F32(roi.y0) - _F32(h) * up) if roi.y0 > _F32(h) * up else 0
    return Roi(x0, y0, min(int(_F32(roi.x1) + _F32(w) * right), width), min(int(_F32(roi.y1) + _F32(h) * down), height))


def crop_box(roi: Roi, ratios: tuple[float, float, float, float], width: int, height: int) -> Roi:
    """The box the crop plugin takes of a `width` x `height` image for `roi`: widened by its expand ratios,
    x1/y1 clipped to the image."""
    if any(ratios):
        return expand_box(roi, ratios, width, height)
    return Roi(roi.x0, roi.y0, min(roi.x1, width), min(roi.y1, height))


def croppable(box: Roi, width: int, height: int) -> bool:
    """Whether `crop` takes `box` of a `width` x `height` image as it is (inside it, within the plugin's limit)."""
    inside = 0 <= box.x0 < box.x1 <= width and 0 <= box.y0 < box.y1 <= height
    return inside and max(box.width, box.height) <= OPENCV_CROP_LIMIT


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
    """The props of an `mxpi_imageresize` element (or a crop's own resize) that shape its output.

    Defaults are the plugin's (MxpiImageResize.cpp DefineProperties/SetProperties). `width`/`height` 0 means
    "not set": `with_size` fills them with the model's input size, as the plugin's dynamic sizes do.
    """

    width: int = 0
    height: int = 0
    resize_type: str = "Resizer_Stretch"
    padding_type: str = "Padding_NO"
    padding_color: tuple[float, float, float] = (0.0, 0.0, 0.0)  # B, G, R
    padding_size: tuple[int, int] = (32, 32)  # paddingWidth, paddingHeight
    scale_value: int = 32
    min_dimension: int = 224
    max_dimension: int = 224
    interpolation: int = 0
    dvpp: bool = False  # cvProcessor/handleMethod "ascend" (the default): DVPP honours `interpolation`

    @classmethod
    def from_props(cls, props: dict[str, str], where: str) -> ResizeSpec:
        resize_type = props.get("resizeType", "Resizer_Stretch")
        if resize_type not in RESIZE_TYPES:
            raise SegScopeError(f"{where}: resizeType {resize_type!r} is not emulated by the embedded backend "
                                f"(supported: {', '.join(RESIZE_TYPES)})")
        padding_type = props.get("paddingType", "Padding_NO")
        if padding_type not in PADDING_TYPES:
            raise SegScopeError(f"{where}: paddingType {padding_type!r} is not one of {', '.join(PADDING_TYPES)}")

        def number(key: str, default: float, kind: type = int) -> float:
            try:
                return kind(props.get(key, default))
            except ValueError:
                raise SegScopeError(f"{where}: {key} must be a number, got {props[key]!r}") from None

        return cls(int(number("resizeWidth", 0)), int(number("resizeHeight", 0)), resize_type, padding_type,
                   tuple(number(f"paddingColor{c}", 0.0, float) for c in "BGR"),  # type: ignore[arg-type]
                   (int(number("paddingWidth", 32)), int(number("paddingHeight", 32))),
                   int(number("scaleValue", 32)), int(number("minDimension", 224)), int(number("maxDimension", 224)),
                   int(number("interpolation", 0)), processor(props) == "ascend")

    @property
    def needs_size(self) -> bool:
        return self.resize_type not in ("Resizer_KeepAspectRatio_Long", "Resizer_KeepAspectRatio_Short",
                                        "Resizer_KeepAspectRatio_FastRCNN", "Resizer_OnlyPadding")

    def with_size(self, size: tuple[int, int]) -> ResizeSpec:
        """This spec with an unset width/height taken from `size` (the model input)."""
        return self if self.width and self.height else replace(self, width=size[0], height=size[1])

    @property
    def effective_padding(self) -> str:
        if self.padding_type == "Padding_NO" and self.resize_type in _ALWAYS_PADDED:
            return "Padding_RightDown"
        return self.padding_type


@dataclass(frozen=True)
class ResizePlan:
    """Where the resized crop sits inside the output: `content` = (x, y, width, height)."""

    output_size: tuple[int, int]
    content: tuple[int, int, int, int]


def _rescale(width: int, height: int, long_edge: int, short_edge: int) -> tuple[int, int]:
    """MxpiImageResize::OpencvRescaleProcess: the smaller of the two edge ratios, rounded half up."""
    factor = min(_F32(long_edge) / _F32(max(width, height)), _F32(short_edge) / _F32(min(width, height)))
    return int(_F32(width) * factor + _F32(0.5)), int(_F32(height) * factor + _F32(0.5))


def _fast_rcnn(width: int, height: int, low: int, high: int) -> tuple[int, int]:
    """MxpiImageResize::CalcFastRcnnHW (unsigned integer arithmetic)."""
    if width > height:
        return (high, height * high // width) if low * width > high * height else (width * low // height, low)
    return (width * high // height, high) if low * height > high * width else (low, height * low // width)


def resize_steps(width: int, height: int, spec: ResizeSpec) -> list[tuple[int, int]]:
    """The sizes the plugin resizes a `width` x `height` image to, one `cv::resize` each, before padding."""
    kind = spec.resize_type
    if spec.needs_size and not (spec.width and spec.height):
        raise SegScopeError(f"{kind} needs resizeWidth and resizeHeight (or the model's input size)")
    if kind == "Resizer_Stretch":
        return [(spec.width, spec.height)]
    if kind in ("Resizer_KeepAspectRatio_Long", "Resizer_KeepAspectRatio_Short"):
        edge = max(width, height) if kind.endswith("Long") else min(width, height)
        scale = _F32(spec.scale_value) / _F32(edge)
        return [(int(_F32(width) * scale), int(_F32(height) * scale))]
    if kind == "Resizer_KeepAspectRatio_Fit":
        if spec.height * width > height * spec.width:  # std::lround: halves away from zero
            return [(spec.width, int(np.floor(height * spec.width / width + 0.5)))]
        return [(int(np.floor(width * spec.height / height + 0.5)), spec.height)]
    if kind == "Resizer_KeepAspectRatio_FastRCNN":
        return [_fast_rcnn(width, height, spec.min_dimension, spec.max_dimension)]
    if kind == "Resizer_OnlyPadding":
        return []
    first = _rescale(width, height, max(spec.width, spec.height), min(spec.width, spec.height))
    if kind == "Resizer_Rescale":
        return [first]
    if spec.width > spec.height and first[1] > spec.height:  # Rescale_Double: a second pass on the short side
        return [first, _rescale(*first, spec.height, spec.height)]
    if spec.width < spec.height and first[0] > spec.width:
        return [first, _rescale(*first, spec.width, spec.width)]
    return [first]


def _padded_size(spec: ResizeSpec) -> tuple[int, int]:
    """The padding target (MxpiImageResize.cpp): Fit pads to the resize size, FastRCNN to maxDimension x
    maxDimension; the others to paddingWidth x paddingHeight (the DVPP OnlyPadding path: the resize size)."""
    if spec.resize_type == "Resizer_KeepAspectRatio_Fit" or (spec.dvpp and spec.resize_type == "Resizer_OnlyPadding"):
        return spec.width, spec.height
    if spec.resize_type == "Resizer_KeepAspectRatio_FastRCNN":
        return spec.max_dimension, spec.max_dimension
    return spec.padding_size


def plan_resize(src_width: int, src_height: int, spec: ResizeSpec) -> ResizePlan:
    steps = resize_steps(src_width, src_height, spec)
    w, h = steps[-1] if steps else (src_width, src_height)
    if w < 1 or h < 1:
        raise SegScopeError(f"{spec.resize_type}: a {src_width}x{src_height} crop resizes to {w}x{h}")
    padding = spec.effective_padding
    if padding == "Padding_NO":
        return ResizePlan((w, h), (0, 0, w, h))
    out_w, out_h = _padded_size(spec)
    if w > out_w or h > out_h:
        raise SegScopeError(f"{spec.resize_type}: the {w}x{h} result is larger than the {out_w}x{out_h} padding "
                            "size (the plugin fails with 1004): set paddingWidth/paddingHeight")
    x, y = ((out_w - w) // 2, (out_h - h) // 2) if padding == "Padding_Around" else (0, 0)
    return ResizePlan((out_w, out_h), (x, y, w, h))


def resize(image: np.ndarray, spec: ResizeSpec, rgb: bool = False) -> tuple[np.ndarray, ResizePlan]:
    """The resize plugin's output for `image` (BGR, or RGB when `rgb`) and the plan that placed it."""
    plan = plan_resize(image.shape[1], image.shape[0], spec)
    interpolation = DVPP_INTERPOLATION.get(spec.interpolation, cv2.INTER_LINEAR) if spec.dvpp else cv2.INTER_LINEAR
    content = image
    for size in resize_steps(image.shape[1], image.shape[0], spec):
        content = content if size == content.shape[1::-1] else cv2.resize(content, size, interpolation=interpolation)
    x, y, w, h = plan.content
    if plan.output_size == (w, h):
        return content, plan
    out_w, out_h = plan.output_size
    color = spec.padding_color[::-1] if rgb else spec.padding_color  # GetScalarValue: the image's channel order
    canvas = np.empty((out_h, out_w) + image.shape[2:], image.dtype)
    canvas[...] = np.asarray(color[: image.shape[2]] if image.ndim == 3 else color[0]).astype(image.dtype)
    canvas[y : y + h, x : x + w] = content
    return canvas, plan


def chain_plans(plans: Sequence[ResizePlan], crop_size: tuple[int, int]) -> ResizePlan:
    """Where the crop lies in the output of several resizes applied one after the other."""
    x, y, w, h = 0.0, 0.0, float(crop_size[0]), float(crop_size[1])
    size = crop_size
    for plan in plans:
        cx, cy, cw, ch = plan.content
        sx, sy = cw / size[0], ch / size[1]
        x, y, w, h = cx + x * sx, cy + y * sy, w * sx, h * sy
        size = plan.output_size
    return ResizePlan(size, (round(x), round(y), round(w), round(h)))


def plan_chain(width: int, height: int, specs: Sequence[ResizeSpec]) -> ResizePlan:
    """Where a `width` x `height` crop lies after the resizes `specs`, one after the other."""
    plans, size = [], (width, height)
    for spec in specs:
        plans.append(plan_resize(*size, spec))
        size = plans[-1].output_size
    return chain_plans(plans, (width, height))


def uncrop_content(array: np.ndarray, plan: ResizePlan) -> np.ndarray:
    """The part of a model output array that covers the crop (drops keep-aspect padding).

    The array may be at another resolution than the model input (e.g. a half-resolution output head).
    """
    x, y, w, h = plan.content
    if plan.content == (0, 0, *plan.output_size):
        return array
    sx, sy = array.shape[1] / plan.output_size[0], array.shape[0] / plan.output_size[1]
    return array[round(y * sy) : round((y + h) * sy), round(x * sx) : round((x + w) * sx)]
