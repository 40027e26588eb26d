"""Reading images and writing files safely.

Images are read the way the MindX opencv decoder reads them (`cv::imdecode(IMREAD_COLOR)`, 3-channel
BGR), through `np.fromfile` so non-ASCII paths work on every OS. Writes go to a temporary file in the
target folder and are renamed into place, so a crash never leaves a partial file, and an existing file is
only replaced when the caller says so.
"""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import cv2
import numpy as np

from .errors import SegScopeError

#: Largest image (width x height) decoded by default; larger files are refused as a decompression guard.
DEFAULT_MAX_PIXELS = 400_000_000


def read_bytes(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise SegScopeError(f"{path}: file not found") from None
    except OSError as exc:
        raise SegScopeError(f"{path}: cannot read ({exc.strerror})") from None


def image_header_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG or JPEG header without decoding, or None for other formats."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                return None
            marker = data[i + 1]
            length = struct.unpack(">H", data[i + 2 : i + 4])[0]
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                height, width = struct.unpack(">HH", data[i + 5 : i + 9])
                return width, height
            i += 2 + length
    return None


def _check_pixels(width: int, height: int, source: str, max_pixels: int) -> None:
    if width * height > max_pixels:
        raise SegScopeError(
            f"{source}: image is {width}x{height} = {width * height:,} pixels, over the limit of "
            f"{max_pixels:,} (raise it with --max-pixels if the file is trusted)"
        )


def decode_image(
    data: bytes, source: str = "<image>", flags: int = cv2.IMREAD_COLOR, max_pixels: int = DEFAULT_MAX_PIXELS
) -> np.ndarray:
    """Decode encoded image bytes; IMREAD_COLOR gives H x W x 3 BGR uint8 as the MindX decoder does."""
    size = image_header_size(data)
    if size is not None:
        _check_pixels(*size, source, max_pixels)
    image = cv2.imdecode(np.frombuffer(data, np.uint8), flags) if data else None
    if image is None:
        raise SegScopeError(f"{source}: not a readable image (PNG, JPEG, TIFF, BMP...)")
    _check_pixels(image.shape[1], image.shape[0], source, max_pixels)
    if image.dtype != np.uint8:  # 16-bit PNG/TIFF: scale to 8 bits like the SDK's u8 pipeline expects
        image = cv2.convertScaleAbs(image, alpha=255.0 / float(np.iinfo(image.dtype).max))  # type: ignore[type-var]
    return image


def image_size(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[int, int]:
    """(width, height) of an image file, from its header when possible (PNG, JPEG), else by decoding."""
    with open(path, "rb") as f:
        head = f.read(65536)
    size = image_header_size(head)
    if size is not None:
        return size
    image = read_image(path, max_pixels)
    return image.shape[1], image.shape[0]


def read_image(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Read an image file as H x W x 3 BGR uint8 (1-channel files are expanded, as imdecode does)."""
    return decode_image(read_bytes(path), str(path), cv2.IMREAD_COLOR, max_pixels)


def read_mask(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Read a mask as H x W uint8 (grayscale; colour masks are converted to gray)."""
    return decode_image(read_bytes(path), str(path), cv2.IMREAD_GRAYSCALE, max_pixels)


def atomic_write_bytes(path: Path, data: bytes, overwrite: bool = False) -> Path:
    """Write `data` to `path` via a temp file + rename; refuse to replace an existing file unless asked."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise SegScopeError(f"{path}: already exists (use --overwrite to replace it)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise SegScopeError(f"{path}: cannot write here ({exc.strerror}); choose another folder") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise SegScopeError(f"{path}: write failed ({exc.strerror}); nothing was changed") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def encode_image(image: np.ndarray, suffix: str = ".png") -> bytes:
    ok, buf = cv2.imencode(suffix, image)
    if not ok:
        raise SegScopeError(f"cannot encode a {image.shape} {image.dtype} array as {suffix}")
    return buf.tobytes()


def write_image(path: Path, image: np.ndarray, overwrite: bool = False) -> Path:
    """Encode by the file's suffix (.png, .tif, .jpg) and write atomically."""
    return atomic_write_bytes(path, encode_image(image, Path(path).suffix.lower() or ".png"), overwrite)
