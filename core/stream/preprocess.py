"""The model card's input preprocessing: the decoded, resized crop -> the tensor the network sees.

Either the card names an AIPP config (what ATC baked into the `.om`; `core.stream.aipp` applies the same math) or
it says it plainly: the channel order or gray (`color`), the channel count (`channels` 1/3/4), and the
normalisation `(pixel * scale - mean) / std` per channel, then the `layout` NCHW or NHWC.

A 3-channel image into a 1-channel model is converted to gray as OpenCV does (`cv2.cvtColor`,
0.299 R + 0.587 G + 0.114 B); a 4-channel model reads the image with its 4th channel (BGRA or 4 bands).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from ..errors import SegScopeError
from .aipp import AippConfig, apply_aipp

COLORS = ("BGR", "RGB", "GRAY")
LAYOUTS = ("NCHW", "NHWC")
CHANNELS = (1, 3, 4)


@dataclass(frozen=True)
class Preprocess:
    """What the network expects; `color` None keeps the decoder's order (cards written before v2)."""

    channels: int = 3
    color: str | None = None
    scale: float = 1.0
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    layout: str = "NCHW"

    def per_channel(self, values: tuple[float, ...]) -> np.ndarray:
        return np.asarray(values * self.channels if len(values) == 1 else values, np.float32)


def decode_flag(preprocess: Preprocess) -> int:
    """The imdecode flag: 3-channel BGR as the MindX opencv decoder, or every channel for 4-channel models."""
    return cv2.IMREAD_UNCHANGED if preprocess.channels == 4 else cv2.IMREAD_COLOR


def _convert(image: np.ndarray, decoder_rgb: bool, preprocess: Preprocess, source: str) -> np.ndarray:
    """The decoded image (H x W [x C] uint8, decoder order) -> H x W x channels in the network's order."""
    have = 1 if image.ndim == 2 else image.shape[2]
    order = "RGB" if decoder_rgb else "BGR"
    if preprocess.channels == 1:
        if have == 1:
            return image.reshape(image.shape[0], image.shape[1], 1)
        code = {("BGR", 3): cv2.COLOR_BGR2GRAY, ("RGB", 3): cv2.COLOR_RGB2GRAY,
                ("BGR", 4): cv2.COLOR_BGRA2GRAY, ("RGB", 4): cv2.COLOR_RGBA2GRAY}[(order, have)]
        return cv2.cvtColor(image, code)[..., None]
    if have != preprocess.channels:
        hint = " and set the decoder's outputDataFormat to BGR (its RGB conversion drops the 4th channel)" \
            if decoder_rgb and have == 3 else ""
        raise SegScopeError(f"{source}: the image has {have} channel(s) but the model takes {preprocess.channels} "
                            f"(card input.channels): give {preprocess.channels}-channel images{hint}")
    if preprocess.color not in (None, order):  # BGR <-> RGB; a 4th channel stays where it is
        image = image[..., [2, 1, 0, 3][:have]]
    return image


def make_tensor(image: np.ndarray, preprocess: Preprocess, aipp: AippConfig | None = None,
                decoder_rgb: bool = False, source: str = "<image>") -> np.ndarray:
    """The resized crop -> the 1 x C x H x W (or 1 x H x W x C) float32 network input."""
    if aipp is not None:
        if image.ndim != 3 or image.shape[2] != 3:
            raise SegScopeError(f"{source}: AIPP RGB888_U8 takes 3-channel images, got shape {image.shape}")
        nchw = apply_aipp(image, aipp)
        if nchw.shape[1] != preprocess.channels:
            raise SegScopeError(f"{source}: the AIPP config gives {nchw.shape[1]} channel(s) but the model takes "
                                f"{preprocess.channels} (card input.channels)")
        return nchw if preprocess.layout == "NCHW" else np.ascontiguousarray(nchw.transpose(0, 2, 3, 1))
    hwc = _convert(image, decoder_rgb, preprocess, source).astype(np.float32)
    if preprocess.scale != 1.0:
        hwc *= np.float32(preprocess.scale)
    if any(preprocess.mean):
        hwc -= preprocess.per_channel(preprocess.mean)
    if any(s != 1.0 for s in preprocess.std):
        hwc /= preprocess.per_channel(preprocess.std)
    tensor = hwc[None] if preprocess.layout == "NHWC" else hwc.transpose(2, 0, 1)[None]
    return np.ascontiguousarray(tensor)


def check_aipp_color(preprocess: Preprocess, aipp: AippConfig, decoder_rgb: bool, card: str) -> None:
    """With an AIPP config, the card's `color` states what the network gets: it must be what AIPP gives
    (for RGB888 input; a YUV input's colour conversion is the config's own business)."""
    if aipp.input_format != "RGB888_U8":
        return
    decoded = "RGB" if decoder_rgb else "BGR"
    given = ({"RGB": "BGR", "BGR": "RGB"}[decoded]) if aipp.rbuv_swap_switch else decoded
    if preprocess.color in ("RGB", "BGR") and preprocess.color != given:
        raise SegScopeError(f"{card}: input.color {preprocess.color} but the decoder emits {decoded} and the AIPP "
                            f"config's rbuv_swap_switch is {str(aipp.rbuv_swap_switch).lower()}, so the network "
                            f"gets {given}: fix the color or the AIPP config")


def aipp_mismatch(preprocess: Preprocess, aipp: AippConfig) -> str:
    """Where an AIPP config's math differs from `(pixel * scale - mean) / std` ("" when it agrees)."""
    channels = min(3, preprocess.channels)
    offsets = preprocess.per_channel(preprocess.mean).astype(np.float64)[:channels] / preprocess.scale
    scales = preprocess.scale / preprocess.per_channel(preprocess.std).astype(np.float64)[:channels]
    for c in range(channels):
        for name, have, want in (("min_chn", aipp.offset[c], offsets[c]), ("var_reci_chn", aipp.var_reci_chn[c],
                                                                            scales[c])):
            if not np.isclose(have, want, rtol=1e-5, atol=1e-7):
                return f"{name}_{c} {have:.7g} but mean/scale/std give {float(want):.7g}"
    return ""


def aipp_text(preprocess: Preprocess, decoder_rgb: bool = False) -> str:
    """An ATC `aipp_op` config with the same math, for baking into the `.om` (3-channel RGB888_U8 input).

    AIPP computes `(in - mean_chn - min_chn) * var_reci_chn`, so `min_chn = mean / scale` and
    `var_reci_chn = scale / std`; mean_chn (integers only in ATC) stays 0. Gray models need csc_switch
    (RGB -> YUV400), which is written with BT.601 full-range coefficients (OpenCV's gray weights).
    """
    channels = 1 if preprocess.channels == 1 else 3
    offsets = [float(m) / preprocess.scale for m in preprocess.per_channel(preprocess.mean)[:channels]]
    scales = [preprocess.scale / float(s) for s in preprocess.per_channel(preprocess.std)[:channels]]
    swap = preprocess.color is not None and preprocess.color != "GRAY" and \
        preprocess.color != ("RGB" if decoder_rgb else "BGR")
    lines = ["# Written by `segscope card` from the model card's preprocessing: (pixel * scale - mean) / std.",
             "aipp_op {", "    aipp_mode : static", "    input_format : RGB888_U8"]
    if preprocess.channels == 1:
        # YUV400 from BGR input (swap off) or RGB input: Y = 0.299 R + 0.587 G + 0.114 B, in 1/256 units.
        r, g, b = 77, 150, 29
        row = (b, g, r) if not decoder_rgb else (r, g, b)
        lines += ["    csc_switch : true", "    rbuv_swap_switch : false",
                  f"    matrix_r0c0 : {row[0]}", f"    matrix_r0c1 : {row[1]}", f"    matrix_r0c2 : {row[2]}",
                  "    output_bias_0 : 0"]
    else:
        lines += ["    csc_switch : false", f"    rbuv_swap_switch : {'true' if swap else 'false'}"]
    lines += [f"    min_chn_{c} : {offsets[c]:.9g}" for c in range(channels)]
    lines += [f"    var_reci_chn_{c} : {scales[c]:.12g}" for c in range(channels)]
    return "\n".join([*lines, "}", ""])
