"""The cache entry layout both input caches write (core.cache.entry): what goes in comes out, and any damage,
a cut, a byte too many or another key reads as None, with either cache's checksum."""

from __future__ import annotations

import io
import zlib

import numpy as np
import pytest
import xxhash

from segscope.core.cache.entry import Crc32, EntryLayout
from segscope.core.cache.store import LAYOUT as STORE
from segscope.core.remote.host_cache import LAYOUT as HOST

LAYOUTS = {"store (xxh3-128)": STORE, "host (CRC-32)": HOST}


def _written(layout: EntryLayout, key: str, arrays: list[np.ndarray], meta: dict[str, object]) -> bytes:
    return b"".join(bytes(part) for part in layout.parts(key, arrays, meta))


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    pixels = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    return [pixels[:, ::2], np.arange(6, dtype=">i4").reshape(2, 3), np.zeros(0, np.float32)]  # not contiguous


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_an_entry_reads_back_as_written(layout: EntryLayout) -> None:
    arrays = _arrays()
    entry = layout.read(io.BytesIO(_written(layout, "image/k1", arrays, {"counts": [1, 2]})), "image/k1")
    assert entry is not None and entry.meta == {"counts": [1, 2]}
    assert len(entry.arrays) == len(arrays)
    for got, want in zip(entry.arrays, arrays):
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_damage_a_cut_an_extra_byte_or_another_key_reads_as_none(layout: EntryLayout) -> None:
    data = _written(layout, "image/k1", _arrays(), {"counts": [1, 2]})
    for at in range(len(data)):  # every byte: magic, checksum, header length, header, arrays
        damaged = bytearray(data)
        damaged[at] ^= 0x01
        assert layout.read(io.BytesIO(bytes(damaged)), "image/k1") is None, at
    for length in (0, 7, 20, len(data) // 2, len(data) - 1):
        assert layout.read(io.BytesIO(data[:length]), "image/k1") is None, length
    assert layout.read(io.BytesIO(data + b"\0"), "image/k1") is None
    assert layout.read(io.BytesIO(data), "image/k2") is None


def test_the_two_caches_checksums_are_xxh3_128_and_crc32_of_header_and_arrays() -> None:
    array = np.arange(10, dtype=np.uint8)
    for layout, expected in ((STORE, lambda h: xxhash.xxh3_128(h + array.tobytes()).digest()),
                             (HOST, lambda h: zlib.crc32(h + array.tobytes()).to_bytes(4, "little"))):
        prefix, header, _ = (bytes(p) for p in layout.parts("k", [array], {}))
        assert prefix[:8] == layout.magic and prefix[8:-4] == expected(header)
        assert int.from_bytes(prefix[-4:], "little") == len(header)
    assert STORE.magic != HOST.magic  # one cache's entry file is never read by the other


def test_crc32_fed_in_pieces_is_zlibs_crc32_of_the_whole() -> None:
    checksum = Crc32(b"head")
    checksum.update(memoryview(b"er and the rest"))
    assert checksum.digest() == zlib.crc32(b"header and the rest").to_bytes(4, "little")
