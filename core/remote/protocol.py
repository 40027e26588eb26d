"""The protocol between the SegScope client and its worker on the Ascend host: frames checked as they are
read, and the results' arrays. What a frame is, and the message types, are `core.remote.frames`'.

Nothing is ever pickled: both ends only parse JSON and raw bytes, and reject anything malformed with a
`ProtocolError` naming what was wrong. This module runs on the host too, so it needs only the standard
library and NumPy.
"""

from __future__ import annotations

import struct
import sys
import zlib
from collections.abc import Callable

import numpy as np

from ..errors import InputError
from ..files.untrusted_json import parse_json
from .frames import (
    DEFAULT_TIMEOUT,
    EXIT_CODES,
    EXIT_OK,
    EXIT_PROTOCOL,
    EXIT_STARTUP,
    HEADER,
    MAGIC,
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    TO_CLIENT,
    TO_WORKER,
    Message,
    MsgType,
    ProtocolError,
    encode,
    heartbeat_interval,
)

__all__ = ["DEFAULT_TIMEOUT", "EXIT_CODES", "EXIT_OK", "EXIT_PROTOCOL", "EXIT_STARTUP", "HEADER", "MAGIC",
           "MAX_PAYLOAD", "PROTOCOL_VERSION", "TO_CLIENT", "TO_WORKER", "Message", "MsgType", "ProtocolError", "encode",
           "heartbeat_interval"]  # `core.remote.frames`' names, imported from here by the rest of `core.remote`

_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")

#: How the worker may encode probabilities: quantised to uint8 (smallest), float16, or float32 (exact).
PROBABILITY_DTYPES = ("uint8", "float16", "float32")
#: The client's default (CLI and viewer alike): exact, metrics identical to a local run.
DEFAULT_PROBABILITIES = "float32"
#: The float encodings and the unsigned type their bits are handled as.
_FLOAT_BITS = {"float16": (np.float16, np.uint16), "float32": (np.float32, np.uint32)}
#: float16's smallest normal value (2^-14): probabilities below it travel as 0 in float16 (an error < the step).
_FLOAT16_NORMAL = np.float32(2.0**-14)
#: A native unsigned value's bytes, most significant first: the byte order of the shuffled floats on the wire.
_MOST_SIGNIFICANT_FIRST = slice(None, None, -1) if sys.byteorder == "little" else slice(None)


def parse_header(header: bytes, allowed: frozenset[MsgType]) -> tuple[MsgType, int, int]:
    """(type, payload length, crc) of a 16-byte header, or ProtocolError."""
    if len(header) != HEADER.size:
        raise ProtocolError(f"truncated frame header ({len(header)} of {HEADER.size} bytes)")
    magic, version, kind, _reserved, length, crc = HEADER.unpack(header)
    if magic != MAGIC:
        raise ProtocolError(f"bad frame magic {magic!r} (expected {MAGIC!r}): the stream is not SegScope frames")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"protocol version {version}, this end speaks {PROTOCOL_VERSION}: "
                            "client and worker come from different SegScope versions")
    try:
        msg_type = MsgType(kind)
    except ValueError:
        raise ProtocolError(f"unknown message type {kind}") from None
    if msg_type not in allowed:
        raise ProtocolError(f"unexpected message type {msg_type.name} in this direction")
    if length > MAX_PAYLOAD:
        raise ProtocolError(f"frame announces {length:,} bytes, over the limit of {MAX_PAYLOAD:,}")
    return msg_type, length, crc


def parse_payload(header: bytes, payload: bytes, msg_type: MsgType, crc: int) -> Message:
    """Check the CRC and split the payload into metadata and blobs."""
    if zlib.crc32(payload, zlib.crc32(header[:12])) != crc:
        raise ProtocolError(f"{msg_type.name} frame failed its crc32 check (corrupted in transit)")
    try:
        (meta_len,) = _U32.unpack_from(payload, 0)
        meta = parse_json(payload[4 : 4 + meta_len].decode("utf-8"), f"{msg_type.name} frame metadata")
        offset = 4 + meta_len
        (count,) = _U16.unpack_from(payload, offset)
        offset += 2
        sizes = [_U64.unpack_from(payload, offset + 8 * i)[0] for i in range(count)]
        offset += 8 * count
    except (struct.error, ValueError) as exc:  # UTF-8, a payload cut short
        raise ProtocolError(f"{msg_type.name} frame has a malformed payload ({exc})") from None
    except InputError as exc:  # JSON: invalid, nested too deeply, NaN, infinities, numbers out of range
        raise ProtocolError(f"{msg_type.name} frame has a malformed payload (its metadata: {exc.problem})") from None
    if not isinstance(meta, dict):
        raise ProtocolError(f"{msg_type.name} frame metadata is not a JSON object")
    if offset + sum(sizes) != len(payload):
        raise ProtocolError(f"{msg_type.name} frame blob sizes {sizes} do not add up to its payload length")
    blobs = []
    for size in sizes:
        blobs.append(payload[offset : offset + size])
        offset += size
    return Message(msg_type, meta, tuple(blobs))


def read_message(read_exact: Callable[[int], bytes], allowed: frozenset[MsgType]) -> Message | None:
    """The next message from `read_exact(n)` (which returns fewer bytes only at end of stream).

    Returns None on a clean end of stream (between frames); a frame cut short is a ProtocolError.
    """
    header = read_exact(HEADER.size)
    if not header:
        return None
    msg_type, length, crc = parse_header(header, allowed)
    payload = read_exact(length)
    if len(payload) != length:
        raise ProtocolError(f"{msg_type.name} frame cut short ({len(payload):,} of {length:,} payload bytes)")
    return parse_payload(header, payload, msg_type, crc)


# --- results: argmax + quantised, compressed probabilities ----------------------------------------------


def quantisation_step(dtype: str) -> float:
    """The largest difference between two neighbouring encodable probabilities in [0, 1]."""
    if dtype == "uint8":
        return 1.0 / 255.0
    if dtype == "float16":
        return 2.0**-11  # float16 spacing just below 1.0
    if dtype == "float32":
        return 0.0  # the model's own values, bit for bit
    raise ValueError(f"probability encoding must be one of {PROBABILITY_DTYPES}, got {dtype!r}")


#: Bytes of a chunk's sample (`_PROBES` blocks spread over it) that decide whether zlib is worth running on it.
_PROBE, _PROBES = 4096, 8


def _compress(data: bytes | memoryview) -> bytes:
    return zlib.compress(data, 1)  # level 1: within ~10 % of level 6 here, several times faster


def _worth_compressing(chunk: memoryview) -> bool:
    """Whether zlib saves a tenth of `chunk`, judged by a sample (a float's low mantissa bytes are noise: zlib
    would spend ~15 ms per 960 x 960 plane on each to save nothing, and the client as long to inflate them)."""
    if len(chunk) < 2 * _PROBE * _PROBES:
        return True
    step = len(chunk) // _PROBES
    sample = b"".join(chunk[i * step : i * step + _PROBE] for i in range(_PROBES))
    return len(_compress(sample)) < 0.9 * len(sample)


def _decompress(blob: bytes, expected: int, what: str) -> bytes:
    """Inflate at most `expected` bytes (a guard against decompression bombs) and insist on that size."""
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(blob, expected)
    except zlib.error as exc:
        raise ProtocolError(f"RESULT {what} does not decompress ({exc})") from None
    if len(data) != expected or inflater.unconsumed_tail or not inflater.eof:
        raise ProtocolError(f"RESULT {what} has the wrong size for its announced shape")
    return data


def _predict_last(values: np.ndarray) -> np.ndarray:
    """What the last class would be, per pixel of a pixels x classes array, if the classes summed to exactly 1
    (255 for uint8), bit for bit.

    The last class travels as its difference from this prediction (a XOR of the bits for floats): mostly zeros
    for softmax outputs, so it compresses to almost nothing, while the decoder restores it exactly.
    """
    if values.dtype == np.uint8:
        return np.uint8(255) - values[:, :-1].sum(axis=1, dtype=np.uint8)
    complement = np.float32(1.0) - values[:, :-1].astype(np.float32).sum(axis=1)
    return complement.astype(values.dtype).view(_FLOAT_BITS[values.dtype.name][1])


def _bytes_of(bits: np.ndarray) -> list[int]:
    """Where each byte of a value of `bits` (an unsigned array) lies in memory, most significant first."""
    return list(range(bits.itemsize))[_MOST_SIGNIFICANT_FIRST]


def encode_arrays(probabilities: np.ndarray, argmax: np.ndarray, dtype: str) -> tuple[dict, tuple[bytes, bytes]]:
    """Metadata and blobs for an H x W x C float32 probability map and its H x W uint8 argmax.

    Probabilities are quantised to `dtype`, the last class as its difference from the others' complement
    (`_predict_last`), and sent as chunks of H x W bytes: each class plane, or for floats each byte of it, most
    significant first (all the planes' first bytes, then their second...: zlib finds the long runs of the
    exponents). A chunk is compressed where that pays (`_worth_compressing`), else sent as it is.
    """
    quantisation_step(dtype)  # validates dtype
    height, width, classes = probabilities.shape
    values = probabilities.reshape(height * width, classes)
    if dtype == "uint8":
        quantised = np.rint(np.clip(values, 0.0, 1.0) * 255.0).astype(np.uint8)
        if classes > 1:
            quantised[:, -1] -= _predict_last(quantised)  # uint8 arithmetic wraps: exact modulo 256
        chunks = [quantised[:, c] for c in range(classes)]
    else:
        float_type, bits_type = _FLOAT_BITS[dtype]
        if dtype == "float16":  # NumPy converts to float16 subnormals several times slower: 0, within the step
            values = np.where(values < _FLOAT16_NORMAL, np.float32(0.0), values)
        # float32: the caller's array (read only: the last class's difference is a new array)
        bits = np.ascontiguousarray(values, float_type).view(bits_type)
        planes = list(bits.view(np.uint8).reshape(-1, classes, bits.itemsize).transpose(1, 0, 2))
        if classes > 1:
            last = bits[:, -1] ^ _predict_last(bits.view(float_type))
            planes[-1] = last.view(np.uint8).reshape(-1, bits.itemsize)
        chunks = [plane[:, byte] for byte in _bytes_of(bits) for plane in planes]
    raw, parts = [], []
    for index, chunk in enumerate(chunks):
        data = chunk.tobytes()
        if _worth_compressing(memoryview(data)):
            parts.append(_compress(data))
        else:
            raw.append(index)
            parts.append(data)
    meta = {"shape": [height, width, classes], "probabilities": dtype, "compression": "zlib",
            "chunks": [len(part) for part in parts], "raw": raw}
    return meta, (_compress(np.ascontiguousarray(argmax, dtype=np.uint8).tobytes()), b"".join(parts))


def _unpacked(meta: dict, blob: bytes, plane: int, count: int) -> list[np.ndarray]:
    """The `count` chunks of `plane` bytes each `encode_arrays` packed into `blob`: zlib-compressed but for those
    `meta["raw"]` lists, of the lengths `meta["chunks"]` gives."""
    lengths, raw = meta.get("chunks"), meta.get("raw")
    if not (isinstance(lengths, list) and len(lengths) == count and all(type(n) is int and n >= 0 for n in lengths)
            and sum(lengths) == len(blob)):
        raise ProtocolError(f"RESULT chunk lengths {lengths!r} do not split its {len(blob):,} probability bytes "
                            f"into {count}")
    if not (isinstance(raw, list) and all(type(i) is int and 0 <= i < count and lengths[i] == plane for i in raw)
            and len(set(raw)) == len(raw)):
        raise ProtocolError(f"RESULT lists impossible uncompressed chunks {raw!r}")
    chunks, offset, stored = [], 0, set(raw)
    for index, length in enumerate(lengths):
        chunk = blob[offset : offset + length]
        offset += length
        chunks.append(np.frombuffer(chunk if index in stored else _decompress(chunk, plane, "probabilities"),
                                    np.uint8))
    return chunks


def decode_arrays(meta: dict, blobs: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities H x W x C float32, argmax H x W uint8) from `encode_arrays` output."""
    try:
        height, width, classes = (int(v) for v in meta["shape"])
        dtype = str(meta["probabilities"])
        compression = meta["compression"]
    except (KeyError, TypeError, ValueError):
        raise ProtocolError(f"RESULT metadata lacks a valid shape/probabilities/compression: {meta!r}") from None
    if dtype not in PROBABILITY_DTYPES or compression != "zlib" or len(blobs) != 2:
        raise ProtocolError(f"RESULT uses an unknown encoding ({dtype}, {compression}, {len(blobs)} blobs)")
    if min(height, width, classes) <= 0 or height * width * classes > MAX_PAYLOAD:
        raise ProtocolError(f"RESULT announces an impossible shape {meta['shape']}")
    pixels = height * width
    argmax = np.frombuffer(_decompress(blobs[0], pixels, "argmax"), np.uint8).reshape(height, width)
    if dtype == "uint8":
        quantised = np.stack(_unpacked(meta, blobs[1], pixels, classes), axis=1)
        if classes > 1:
            quantised[:, -1] += _predict_last(quantised)
        values = quantised.astype(np.float32) / np.float32(255.0)
    else:
        float_type, bits_type = _FLOAT_BITS[dtype]
        bits = np.empty((pixels, classes), bits_type)
        layout = bits.view(np.uint8).reshape(pixels, classes, bits.itemsize)
        chunks = iter(_unpacked(meta, blobs[1], pixels, classes * bits.itemsize))
        for byte in _bytes_of(bits):
            for c in range(classes):
                layout[:, c, byte] = next(chunks)
        if classes > 1:
            bits[:, -1] ^= _predict_last(bits.view(float_type))
        values = bits.view(float_type).astype(np.float32, copy=False)
    return values.reshape(height, width, classes), argmax
