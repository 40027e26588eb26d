"""PNG decoding that gives OpenCV's pixels, bit for bit, with less work: only the rows asked for, and libpng
through imagecodecs (~25 % less CPU than OpenCV's build for the demo slides) where the file needs no
conversion that could differ (nor an eXIf orientation, which OpenCV applies).

PNG is lossless: an 8-bit grayscale, RGB or RGBA image without a palette or a transparency chunk decodes to
its stored samples in any conforming decoder; OpenCV then only orders the channels BGR (and drops alpha for a
3-channel read). Every other PNG (palette, 16-bit, gray + alpha, tRNS) is left to OpenCV (`decode` gives None).
A decode of the first rows reads the file with its header saying so (`top_rows`): libpng decodes row by row,
so those rows are the whole file's.
"""

from __future__ import annotations

import logging
import struct
import zlib

import cv2
import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: libpng's warning of the rows a shortened file leaves unread, through imagecodecs' logger: not the user's concern.
logging.getLogger("imagecodecs").setLevel(logging.ERROR)
#: Colour types whose samples reach OpenCV unconverted: grayscale, RGB, RGBA.
_PLAIN = {0: 1, 2: 3, 6: 4}


class Damaged(Exception):
    """The PNG's data is damaged or the file ends early (the caller names the file)."""


def _header(data: bytes) -> tuple[bytes, int] | None:
    """The IHDR chunk's 13 bytes and its checksum as stored, or None when `data` does not start with one."""
    if len(data) < 33 or data[:8] != SIGNATURE or data[8:16] != b"\x00\x00\x00\x0dIHDR":
        return None
    return data[16:29], struct.unpack(">I", data[29:33])[0]


def _chunks(data: bytes) -> list[bytes] | None:
    """The chunk types from the header to IEND, or None when the file does not run whole to IEND (OpenCV's to
    refuse: it reads to the end)."""
    kinds, at = [], 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        kinds.append(kind)
        at += 12 + length
        if kind == b"IEND":
            return kinds if at <= len(data) else None
    return None


def top_rows(data: bytes, rows: int) -> bytes | None:
    """A non-interlaced PNG's bytes with its header saying `rows` rows (0 < rows < its height), so a decoder
    stops after the rows it needs. None where that does not hold (not a PNG, interlaced, a damaged header, or
    an eXIf chunk, whose orientation OpenCV would apply to the rows)."""
    found = _header(data)
    if found is None:
        return None
    fields, crc = found
    height, interlace = struct.unpack(">I", fields[4:8])[0], fields[12]
    if interlace != 0 or not 0 < rows < height or zlib.crc32(b"IHDR" + fields) != crc:
        return None
    if b"eXIf" in (_chunks(data) or [b"eXIf"]):
        return None
    patched = b"IHDR" + fields[:4] + struct.pack(">I", rows) + fields[8:]
    return data[:12] + patched + struct.pack(">I", zlib.crc32(patched)) + data[33:]


def oriented(data: bytes) -> bool:
    """Whether a PNG has an eXIf chunk, whose orientation OpenCV applies (a file whose chunks do not run whole
    to IEND has none to apply: OpenCV refuses it)."""
    return b"eXIf" in (_chunks(data) or ())


def decode(data: bytes, flags: int, box: tuple[int, int, int, int] | None = None) -> np.ndarray | None:
    """What `cv2.imdecode(data, flags)` gives for IMREAD_COLOR or IMREAD_UNCHANGED (only the pixels of `box`,
    x0, y0, x1, y1 inside the image, when given: rows below it are not decoded), by libpng through
    imagecodecs; None where OpenCV must decode it (see the module docstring, or imagecodecs is not installed).
    `Damaged` when libpng refuses the data."""
    found = _header(data)
    if found is None or flags not in (cv2.IMREAD_COLOR, cv2.IMREAD_UNCHANGED):
        return None
    depth, colour = found[0][8], found[0][9]
    kinds = _chunks(data)
    if depth != 8 or colour not in _PLAIN or kinds is None or {b"PLTE", b"tRNS", b"eXIf"} & set(kinds):
        return None  # a palette, transparency or an orientation (eXIf) OpenCV would apply
    try:
        import imagecodecs  # imported here: a remote host may lack it (OpenCV decodes there)
    except ImportError:
        return None
    shortened = top_rows(data, box[3]) if box is not None else None
    try:
        samples = imagecodecs.png_decode(shortened or data)
    except Exception as exc:  # imagecodecs.PngError, or its MemoryError/ValueError for a file cut short
        raise Damaged(str(exc)) from None
    if box is not None:
        samples = samples[box[1] : box[3], box[0] : box[2]]
    channels = _PLAIN[colour]
    if channels == 1:
        return cv2.cvtColor(samples, cv2.COLOR_GRAY2BGR) if flags == cv2.IMREAD_COLOR else np.ascontiguousarray(samples)
    if flags == cv2.IMREAD_COLOR:
        return cv2.cvtColor(samples, cv2.COLOR_RGB2BGR if channels == 3 else cv2.COLOR_RGBA2BGR)
    return cv2.cvtColor(samples, cv2.COLOR_RGB2BGR if channels == 3 else cv2.COLOR_RGBA2BGRA)
