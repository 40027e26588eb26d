"""Static AIPP (Ascend's in-model preprocessing) configs, and the same math on the CPU.

ATC bakes an `aipp_op { ... }` block into the `.om`; the embedded backend applies exactly that math so an
ONNX export of the same network sees the input the `.om` sees:
`out_c = (in_c - mean_chn_c - min_chn_c) * var_reci_chn_c`, after swapping channels 0 and 2 when
`rbuv_swap_switch` is true (opencv decodes BGR, so the swap hands the network RGB).

Colour-space conversion (`csc_switch`, CANN ATC "CSC Configuration") of `YUV420SP_U8` input (NV12 from
DVPP, reaching this as YUV444: the chroma planes repeated 2x2, see core.stream.dvpp): after the U/V swap and
before the normalisation, `out_r = (sum_c matrix_rc * (in_c - input_bias_c)) >> 8`, clipped to 0..255.
RGB-to-YUV conversion (RGB888_U8 input with csc_switch, e.g. a gray model's YUV400) is not emulated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import cv2
import numpy as np

from ..errors import SegScopeError
from ..files.fileio import read_text

_LINE = re.compile(r"^\s*(\w+)\s*:\s*(\S+)\s*$")
_UNSUPPORTED_SWITCHES = ("crop", "resize", "padding")
INPUT_FORMATS = ("RGB888_U8", "YUV420SP_U8")
#: An insert-op config is a few dozen lines.
MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True)
class AippConfig:
    input_format: str = "RGB888_U8"
    rbuv_swap_switch: bool = False
    mean_chn: tuple[float, float, float] = (0.0, 0.0, 0.0)
    min_chn: tuple[float, float, float] = (0.0, 0.0, 0.0)
    var_reci_chn: tuple[float, float, float] = (1.0, 1.0, 1.0)
    csc_switch: bool = False
    matrix: tuple[tuple[int, int, int], ...] = ((256, 0, 0), (0, 256, 0), (0, 0, 256))  # matrix_rXcY
    input_bias: tuple[int, int, int] = (0, 0, 0)

    @property
    def yuv_input(self) -> bool:
        return self.input_format == "YUV420SP_U8"

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
    if fields.get("input_format", "RGB888_U8") not in INPUT_FORMATS:
        raise SegScopeError(f"{source}: input_format {fields['input_format']!r}: the embedded backend supports "
                            f"{', '.join(INPUT_FORMATS)}")
    for switch in _UNSUPPORTED_SWITCHES:
        if fields.get(switch, "false") == "true":
            raise SegScopeError(f"{source}: {switch} true is not supported by the embedded backend")

    def channels(key: str, default: float) -> tuple[float, float, float]:
        try:
            return tuple(float(fields.get(f"{key}_{c}", default)) for c in range(3))  # type: ignore[return-value]
        except ValueError:
            raise SegScopeError(f"{source}: {key}_N must be numbers") from None

    def integers(key: str, count: int, default: int = 0) -> tuple[int, ...]:
        try:
            return tuple(int(fields.get(f"{key}_{c}", default)) for c in range(count))
        except ValueError:
            raise SegScopeError(f"{source}: {key}_N must be integers") from None

    try:
        matrix = tuple(tuple(int(fields.get(f"matrix_r{r}c{c}", 256 if r == c else 0)) for c in range(3))
                       for r in range(3))
    except ValueError:
        raise SegScopeError(f"{source}: matrix_rXcY must be integers") from None
    csc = fields.get("csc_switch", "false") == "true"
    if csc and fields.get("input_format", "RGB888_U8") != "YUV420SP_U8":
        raise SegScopeError(f"{source}: csc_switch true with RGB888_U8 input (RGB to YUV) is not supported by the "
                            "embedded backend (YUV420SP_U8 to RGB is)")
    if csc and not any(f.startswith("matrix_") for f in fields):
        raise SegScopeError(f"{source}: csc_switch true needs its matrix_r0c0..matrix_r2c2 (see CANN's CSC "
                            "configuration tables)")
    return AippConfig(
        input_format=fields.get("input_format", "RGB888_U8"),
        rbuv_swap_switch=fields.get("rbuv_swap_switch", "false") == "true",
        mean_chn=channels("mean_chn", 0.0),
        min_chn=channels("min_chn", 0.0),
        var_reci_chn=channels("var_reci_chn", 1.0),
        csc_switch=csc,
        matrix=matrix,  # type: ignore[arg-type]
        input_bias=integers("input_bias", 3),  # type: ignore[arg-type]
    )


def load_aipp(path: Path) -> AippConfig:
    return parse_aipp(read_text(path, "AIPP config", MAX_CONFIG_BYTES), str(path))


def apply_csc(yuv: np.ndarray, config: AippConfig) -> np.ndarray:
    """AIPP's YUV-to-RGB conversion of an H x W x 3 uint8 YUV444 image (after the U/V swap)."""
    centred = yuv.astype(np.int64) - np.asarray(config.input_bias, np.int64)
    out = np.einsum("rc,hwc->hwr", np.asarray(config.matrix, np.int64), centred) >> 8
    return np.clip(out, 0, 255).astype(np.uint8)


def apply_aipp(image: np.ndarray, config: AippConfig) -> np.ndarray:
    """H x W x 3 uint8 (decoder order; YUV444 for YUV420SP input) -> 1 x 3 x H x W float32, the tensor the
    network sees."""
    if config.yuv_input and config.rbuv_swap_switch:  # for YUV the switch swaps U and V (NV21 input)
        image = image[..., [0, 2, 1]]
        config = replace(config, rbuv_swap_switch=False)
    if config.csc_switch:  # YUV input only (parse_aipp)
        image = apply_csc(image, config)
    scales = config.var_reci_chn
    # blobFromImage swaps first, then subtracts the per-channel offset and scales: the AIPP order.
    blob = cv2.dnn.blobFromImage(image, scalefactor=scales[0], mean=config.offset, swapRB=config.rbuv_swap_switch)
    if len(set(scales)) > 1:
        np.multiply(blob, np.asarray(scales, np.float32).reshape(1, 3, 1, 1) / np.float32(scales[0]), out=blob)
    return blob
