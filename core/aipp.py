"""Static AIPP (Ascend's in-model preprocessing) configs, and the same math on the CPU.

ATC bakes an `aipp_op { ... }` block into the `.om`; the embedded backend applies exactly that math so an
ONNX export of the same network sees the input the `.om` sees:
`out_c = (in_c - mean_chn_c - min_chn_c) * var_reci_chn_c`, after swapping channels 0 and 2 when
`rbuv_swap_switch` is true (opencv decodes BGR, so the swap hands the network RGB).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from .errors import SegScopeError

_LINE = re.compile(r"^\s*(\w+)\s*:\s*(\S+)\s*$")
_UNSUPPORTED_SWITCHES = ("csc_switch", "crop", "resize", "padding")


@dataclass(frozen=True)
class AippConfig:
    input_format: str = "RGB888_U8"
    rbuv_swap_switch: bool = False
    mean_chn: tuple[float, float, float] = (0.0, 0.0, 0.0)
    min_chn: tuple[float, float, float] = (0.0, 0.0, 0.0)
    var_reci_chn: tuple[float, float, float] = (1.0, 1.0, 1.0)

    @property
    def offset(self) -> tuple[float, float, float]:
        return tuple(m + n for m, n in zip(self.mean_chn, self.min_chn))  # type: ignore[return-value]


def parse_aipp(text: str, source: str = "<aipp>") -> AippConfig:
    """Parse the first `aipp_op` block of an ATC insert-op config (comments with `#`)."""
    uncommented = re.sub(r"#[^\n]*", "", text)
    body = re.search(r"aipp_op\s*\{(.*?)\}", uncommented, re.S)
    if body is None:
        raise SegScopeError(f"{source}: no 'aipp_op {{ ... }}' block found")
    first_line = uncommented.count("\n", 0, body.start(1)) + 1
    fields: dict[str, str] = {}
    for number, line in enumerate(body.group(1).splitlines(), first_line):
        if not line.strip():
            continue
        match = _LINE.match(line)
        if match is None:
            raise SegScopeError(f"{source}:{number}: expected 'key : value', got {line.strip()!r}")
        fields[match.group(1)] = match.group(2).strip('"')
    if fields.get("aipp_mode", "static") != "static":
        raise SegScopeError(f"{source}: aipp_mode {fields['aipp_mode']!r}: only static AIPP is supported")
    if fields.get("input_format", "RGB888_U8") != "RGB888_U8":
        raise SegScopeError(f"{source}: input_format {fields['input_format']!r}: only RGB888_U8 is supported")
    for switch in _UNSUPPORTED_SWITCHES:
        if fields.get(switch, "false") == "true":
            raise SegScopeError(f"{source}: {switch} true is not supported by the embedded backend")

    def channels(key: str, default: float) -> tuple[float, float, float]:
        try:
            return tuple(float(fields.get(f"{key}_{c}", default)) for c in range(3))  # type: ignore[return-value]
        except ValueError:
            raise SegScopeError(f"{source}: {key}_N must be numbers") from None

    return AippConfig(
        input_format="RGB888_U8",
        rbuv_swap_switch=fields.get("rbuv_swap_switch", "false") == "true",
        mean_chn=channels("mean_chn", 0.0),
        min_chn=channels("min_chn", 0.0),
        var_reci_chn=channels("var_reci_chn", 1.0),
    )


def load_aipp(path: Path) -> AippConfig:
    try:
        return parse_aipp(Path(path).read_text(encoding="utf-8"), str(path))
    except FileNotFoundError:
        raise SegScopeError(f"{path}: AIPP config not found") from None


def apply_aipp(image: np.ndarray, config: AippConfig) -> np.ndarray:
    """H x W x 3 uint8 (decoder order) -> 1 x 3 x H x W float32, the tensor the network sees."""
    scales = config.var_reci_chn
    # blobFromImage swaps first, then subtracts the per-channel offset and scales: the AIPP order.
    blob = cv2.dnn.blobFromImage(image, scalefactor=scales[0], mean=config.offset, swapRB=config.rbuv_swap_switch)
    if len(set(scales)) > 1:
        np.multiply(blob, np.asarray(scales, np.float32).reshape(1, 3, 1, 1) / np.float32(scales[0]), out=blob)
    return blob
