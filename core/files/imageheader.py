"""Image sizes from file headers, read before anything is decoded (a decompression-bomb guard).

Every format SegScope decodes is recognised by its magic bytes (never by its name: a TIFF named `.png` is a
TIFF): PNG, JPEG, TIFF (and BigTIFF), BMP, WebP, GIF and PNM. A file that is none of these is not decoded.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

Size = tuple[int, int]  # (width, height)

_JPEG_FRAMES = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
#: TIFF field types -> (struct code, size) of the integer types ImageWidth/ImageLength may use.
_TIFF_TYPES = {3: ("H", 2), 4: ("I", 4), 16: ("Q", 8)}


def _png(data: bytes) -> Size | None:
    return struct.unpack(">II", data[16:24]) if len(data) >= 24 and data[12:16] == b"IHDR" else None


def _jpeg(data: bytes) -> Size | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if marker in _JPEG_FRAMES:
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


def _tiff(data: bytes) -> Size | None:
    """The first image directory's ImageWidth (256) and ImageLength (257): what imdecode reads."""
    order = "<" if data[:2] == b"II" else ">"
    big = struct.unpack(order + "H", data[2:4])[0] == 43
    try:
        if big:
            offset = struct.unpack(order + "Q", data[8:16])[0]
            count, entry, first = struct.unpack(order + "Q", data[offset : offset + 8])[0], 20, offset + 8
        else:
            offset = struct.unpack(order + "I", data[4:8])[0]
            count, entry, first = struct.unpack(order + "H", data[offset : offset + 2])[0], 12, offset + 2
        found: dict[int, int] = {}
        for k in range(min(count, 4096)):
            at = first + k * entry
            tag, kind = struct.unpack(order + "HH", data[at : at + 4])
            if tag in (256, 257) and kind in _TIFF_TYPES:
                code, _ = _TIFF_TYPES[kind]
                value_at = at + (12 if big else 8)
                found[tag] = struct.unpack(order + code, data[value_at : value_at + _TIFF_TYPES[kind][1]])[0]
    except struct.error:
        return None
    return (found[256], found[257]) if 256 in found and 257 in found else None


def _bmp(data: bytes) -> Size | None:
    if len(data) < 26:
        return None
    header = struct.unpack("<I", data[14:18])[0]
    if header == 12:  # OS/2 BITMAPCOREHEADER
        return struct.unpack("<HH", data[18:22])
    width, height = struct.unpack("<ii", data[18:26])
    return abs(width), abs(height)


def _webp(data: bytes) -> Size | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = struct.unpack("<I", data[21:25])[0]
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


def _gif(data: bytes) -> Size | None:
    return struct.unpack("<HH", data[6:10]) if len(data) >= 10 else None


def _pnm(data: bytes) -> Size | None:
    numbers: list[int] = []
    for line in data[2:4096].split(b"\n"):
        for token in line.split(b"#", 1)[0].split():
            if not token.isdigit():
                return None
            numbers.append(int(token))
            if len(numbers) == 2:
                return numbers[0], numbers[1]
    return None


_FORMATS: tuple[tuple[Callable[[bytes], bool], str, Callable[[bytes], Size | None]], ...] = (
    (lambda d: d[:8] == b"\x89PNG\r\n\x1a\n", "PNG", _png),
    (lambda d: d[:2] == b"\xff\xd8", "JPEG", _jpeg),
    (lambda d: d[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"), "TIFF", _tiff),
    (lambda d: d[:2] == b"BM", "BMP", _bmp),
    (lambda d: d[:4] == b"RIFF" and d[8:12] == b"WEBP", "WebP", _webp),
    (lambda d: d[:6] in (b"GIF87a", b"GIF89a"), "GIF", _gif),
    (lambda d: len(d) > 2 and d[:1] == b"P" and d[1:2] in b"123456" and d[2:3].isspace(), "PNM", _pnm),
)


def image_format(data: bytes) -> str | None:
    """The format's name by its magic bytes ("PNG", "TIFF", ...), or None when SegScope does not decode it."""
    return next((name for matches, name, _ in _FORMATS if matches(data)), None)


def header_size(data: bytes) -> Size | None:
    """(width, height) from the header of a known format, or None when the header cannot be read.

    `data` may be only the start of a file, except for TIFF, whose first directory may lie anywhere."""
    return next((parse(data) for matches, _, parse in _FORMATS if matches(data)), None)

