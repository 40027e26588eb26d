"""One cache entry's file, as both of SegScope's input caches write it: the decoded-input store on this machine
(`core.cache.store`) and the remote worker's input cache on a host (`core.remote.host_cache`).

The file holds the layout's magic, a checksum of everything after it, the header's length, the header (JSON:
the key the entry was stored under, each array's dtype and shape, the caller's facts) and the arrays' bytes.
A read checks the magic, that the header names the key asked for, the arrays' sizes and the checksum, so an
entry that is damaged, cut short or stored under another key reads as None, never as a wrong number. Standard
library and NumPy only: a worker's host has neither diskcache nor xxhash (its caches check with CRC-32).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

import numpy as np

#: The longest header a read accepts (a header names a key and a few arrays).
MAX_HEADER = 1 << 20


class Checksum(Protocol):
    def update(self, data: bytes | memoryview) -> None: ...

    def digest(self) -> bytes: ...


class Crc32:
    """zlib's CRC-32 as a checksum object (4 bytes): the standard library's fastest guard against damage."""

    def __init__(self, data: bytes | memoryview = b""):
        self.value = zlib.crc32(data)

    def update(self, data: bytes | memoryview) -> None:
        self.value = zlib.crc32(data, self.value)

    def digest(self) -> bytes:
        return self.value.to_bytes(4, "little")


@dataclass(frozen=True)
class Entry:
    arrays: list[np.ndarray]
    meta: dict[str, object]


@dataclass(frozen=True)
class EntryLayout:
    """A cache's entry files: `magic` (8 bytes) and its checksum (`checksum(header)` starts one on the header)."""

    magic: bytes
    checksum: Callable[[bytes], Checksum]
    checksum_size: int

    @property
    def _prefix(self) -> struct.Struct:
        return struct.Struct(f"<8s{self.checksum_size}sI")  # magic, checksum, header length

    def parts(self, key: str, arrays: Sequence[np.ndarray], meta: Mapping[str, object]) -> list[memoryview]:
        """The entry's bytes in order, to be written one after another (C-contiguous arrays are not copied)."""
        views = [np.ascontiguousarray(a).data.cast("B") for a in arrays]
        described = {"key": key, "arrays": [[a.dtype.str, list(a.shape)] for a in arrays], "meta": dict(meta)}
        header = json.dumps(described, separators=(",", ":")).encode("utf-8")
        checksum = self.checksum(header)
        for view in views:
            checksum.update(view)
        prefix = self._prefix.pack(self.magic, checksum.digest(), len(header))
        return [memoryview(prefix), memoryview(header), *views]

    def read(self, stream: BinaryIO, key: str) -> Entry | None:
        """The entry in `stream` (read to its end) if it is whole, unchanged and stored under `key`, else None."""
        try:
            prefix = stream.read(self._prefix.size)
            if len(prefix) != self._prefix.size:
                return None
            magic, expected, header_size = self._prefix.unpack(prefix)
            header = stream.read(header_size) if magic == self.magic and header_size <= MAX_HEADER else b""
            if not header or len(header) != header_size:
                return None
            described = json.loads(header)
            if not isinstance(described, dict) or described.get("key") != key:
                return None
            checksum = self.checksum(header)
            arrays = []
            for dtype, shape in described["arrays"]:
                array = np.empty(tuple(int(n) for n in shape), np.dtype(dtype))
                view = array.data.cast("B")
                if stream.readinto(view) != len(view):  # type: ignore[attr-defined]
                    return None
                checksum.update(view)
                arrays.append(array)
            if stream.read(1) or checksum.digest() != expected:
                return None
            return Entry(arrays, dict(described.get("meta") or {}))
        except (ValueError, TypeError, KeyError, OSError):  # json.JSONDecodeError is a ValueError
            return None
