"""Verified entries of arrays under a size cap, the least recently used evicted first (`diskcache`).

An entry is one file laid out as `core.cache.entry` says, checked by a 16-byte xxh3-128 digest, read into
memory at file speed (no decoding); one that is damaged, cut short or not the one asked for is a miss (removed,
said once), never a wrong number. diskcache writes an entry's file before it commits the row that names it,
so a writer killed midway leaves no entry, only a stray file, removed once it is an hour old (an interrupted
write, not one in progress) by a store opened here, or by `segscope cache clear`. A store looks for strays at most
once an hour per folder (`SWEPT_NAME`): walking the folders of 100,000 entries takes a second of Python, which
would hold up every window opened beside it.

Before each write the least recently used entries are evicted until the new one fits under the cap; an entry
over a quarter of the cap is not stored. (The index's own queries use diskcache's `_sql`, stable across 5.x:
which key was used least recently, and which files the index names.)
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import diskcache
import numpy as np
import xxhash

from .entry import Entry, EntryLayout

LAYOUT = EntryLayout(b"SGSCACH1", xxhash.xxh3_128, 16)
#: A file in the store's folder that no row names and that is older than this is an interrupted write's.
STRAY_AGE_S = 3600.0
#: The file whose modification time says when strays were last looked for in the store's folder.
SWEPT_NAME = ".strays-swept"
#: Seconds a lookup or a write waits for another process's hold on the index before it goes on without the cache.
LOCK_WAIT_S = 5.0
#: What makes the store unusable for one call (a full disk, an index another process holds, a damaged index).
UNUSABLE = (OSError, sqlite3.Error, diskcache.Timeout)
log = logging.getLogger(__name__)


def content_digest(data: bytes | memoryview) -> str:
    """The hex digest that keys a file's content (xxh3-128: several GB/s, so every lookup hashes the file)."""
    return xxhash.xxh3_128_hexdigest(data)


@dataclass(frozen=True)
class StoreInfo:
    folder: Path
    entries: int
    bytes: int  # what the entries and their index take on disk
    size_limit: int
    stray_files: int  # files of interrupted writes, not counted in `bytes`
    stray_bytes: int


class _Chunks:
    """The entry's parts read as one file (diskcache copies a `read()`-able value 4 MB at a time)."""

    def __init__(self, parts: Sequence[memoryview]):
        self._parts = list(parts)

    def read(self, size: int = -1) -> bytes:
        while self._parts and not len(self._parts[0]):
            self._parts.pop(0)
        if not self._parts:
            return b""
        head = self._parts[0]
        taken = head if size < 0 else head[:size]
        self._parts[0] = head[len(taken):]
        return bytes(taken)


class EntryStore:
    """Entries by key in `folder`, at most `size_limit` bytes; hits and misses counted per kind of entry."""

    def __init__(self, folder: Path, size_limit: int):
        self.folder, self.size_limit = Path(folder), int(size_limit)
        self.folder.mkdir(parents=True, exist_ok=True)
        # Evicted by `_make_room` before each write, one entry at a time (diskcache's own culling drops ten).
        # A busy index is waited for up to LOCK_WAIT_S per call, then that lookup is a miss (never a hang).
        self._cache = diskcache.Cache(str(self.folder), size_limit=self.size_limit, cull_limit=0, timeout=LOCK_WAIT_S,
                                      eviction_policy="least-recently-used", statistics=False)
        self._lock = threading.Lock()
        # Every lookup in order, in 10 bytes (a run of 100,000 images makes 300,000): its key's hash (equal keys
        # are one key; two keys a 64-bit hash cannot tell apart are not met in counting a run's hits), its kind's
        # index in `_kinds`, whether it hit.
        self._keys = array("q")
        self._kinds: list[str] = []
        self._lookup_kinds = bytearray()
        self._hits = bytearray()
        self._warned = False
        self._sweep_if_due()

    def get(self, key: str, kind: str) -> Entry | None:
        """The verified entry stored under `key`, or None (counted as a hit or a miss of `kind`)."""
        entry = None
        try:
            value = self._cache.get(key, default=None, read=True)
            if value is not None:
                entry = self._read(value, key)
                if entry is None:
                    self._drop(key)
        except UNUSABLE as exc:
            self._warn(f"cannot read the decoded-input cache ({exc}); decoding instead (`segscope cache clear` "
                       "empties a damaged cache)")
        with self._lock:
            if kind not in self._kinds:
                self._kinds.append(kind)
            self._keys.append(hash(key))
            self._lookup_kinds.append(self._kinds.index(kind))
            self._hits.append(entry is not None)
        return entry

    def put(self, key: str, arrays: Sequence[np.ndarray], meta: dict[str, object]) -> bool:
        """Store `arrays` (C-contiguous copies are made where needed) and `meta` under `key`; False when the
        entry is too large for the cap or cannot be written (said once; the run goes on without it)."""
        if sum(array.nbytes for array in arrays) > self.size_limit // 4:
            return False
        parts = LAYOUT.parts(key, arrays, meta)
        try:
            self._make_room(sum(len(part) for part in parts))
            self._cache.set(key, _Chunks(parts), read=True)
        except UNUSABLE as exc:
            self._warn(f"cannot write to the decoded-input cache ({exc}); the run goes on without it")
            return False
        return True

    def _make_room(self, size: int) -> None:
        """Evict the least recently used entries until `size` more bytes fit under the cap."""
        while self._cache.volume() + size > self.size_limit:
            oldest = self._cache._sql("SELECT key FROM Cache ORDER BY access_time LIMIT 1").fetchall()
            if not oldest:
                return
            self._cache.delete(oldest[0][0])

    def _read(self, value: object, key: str) -> Entry | None:
        """The entry in the file diskcache opened (every entry is a file: `put` hands it a stream) if it
        checks out."""
        if not hasattr(value, "readinto"):
            return None
        stream: BinaryIO = value  # type: ignore[assignment]
        try:
            return LAYOUT.read(stream, key)
        finally:
            stream.close()

    def _drop(self, key: str) -> None:
        self._warn("a damaged entry in the decoded-input cache was removed and its image decoded again")
        try:
            self._cache.delete(key)
        except UNUSABLE:
            pass

    def _warn(self, text: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("%s: %s", self.folder, text)

    def mark(self) -> int:
        """Where `use` starts counting from (the lookups so far)."""
        with self._lock:
            return len(self._keys)

    def use(self, since: int = 0) -> dict[str, tuple[int, int]]:
        """Per kind of entry, (how many came from the store, how many were looked up) since `mark()` gave
        `since`: each key once, by its first lookup (a key decoded and stored, then read again, did not)."""
        with self._lock:
            lookups = zip(self._keys[since:], [self._kinds[k] for k in self._lookup_kinds[since:]], self._hits[since:])
        first: dict[int, tuple[str, int]] = {}
        for key, kind, hit in lookups:
            first.setdefault(key, (kind, hit))
        counts: dict[str, tuple[int, int]] = {}
        for kind, hit in first.values():
            hits, total = counts.get(kind, (0, 0))
            counts[kind] = hits + hit, total + 1
        return counts

    def _strays(self) -> list[Path]:
        """Files in the folder that no entry names (besides the index): interrupted writes, or writes going on."""
        named = {os.path.normpath(name) for (name,) in
                 self._cache._sql("SELECT filename FROM Cache WHERE filename IS NOT NULL").fetchall()}
        found = []
        for top, _dirs, files in os.walk(self.folder):
            inside = os.path.relpath(top, self.folder)
            prefix = "" if inside == os.curdir else inside + os.sep
            found += [Path(top, f) for f in files if f.endswith(".val") and prefix + f not in named]
        return found

    def _sweep_if_due(self) -> None:
        """Remove the strays an hour old unless that was done here within the hour (`SWEPT_NAME`)."""
        swept = self.folder / SWEPT_NAME
        try:
            if time.time() - swept.stat().st_mtime < STRAY_AGE_S:
                return
        except OSError:
            pass  # never swept here
        self._remove_strays(STRAY_AGE_S)
        try:
            swept.touch()
        except OSError:
            pass  # (looked for again next time)

    def _remove_strays(self, min_age: float) -> None:
        now = time.time()
        for path in self._strays():
            try:
                if now - path.stat().st_mtime >= min_age:
                    path.unlink()
            except OSError:
                continue

    def info(self) -> StoreInfo:
        strays = self._strays()
        stray_bytes = 0
        for path in strays:
            try:
                stray_bytes += path.stat().st_size
            except OSError:
                continue
        return StoreInfo(self.folder, len(self._cache), self._cache.volume(), self.size_limit, len(strays),
                         stray_bytes)

    def clear(self) -> int:
        """Remove every entry (and stray files); returns how many entries there were."""
        count = int(self._cache.clear(retry=True))  # (a command of its own: it may wait for other runs' writes)
        self._remove_strays(0.0)
        return count

    def close(self) -> None:
        self._cache.close()
