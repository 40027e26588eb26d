"""The worker's cache of inputs on the host: what a client sent for a request, kept under the request's content
key, so a repeat eval sends only keys (`MsgType.INFER` with a key and no bytes; a key not held is asked for
with NEED). Standard library and NumPy only: the host has no diskcache or xxhash.

The key is the client's (`core.remote.backend`: the xxh3-128 of the file's content, and the crop box where the
ROI's crop travels), so a file changed by one byte, its size and time kept, has another key and is never
served. An entry is one file named by the key's BLAKE2b, laid out as `core.cache.entry` says and checked by a
CRC-32 (it guards against damage, the key against a changed file: 4 ms for a demo crop's 9.7 MB, BLAKE2b would
take 14); it holds the bytes sent, or the decoded pixels of a crop (what the backend would decode them to, so a
hit decodes nothing). An entry damaged, cut short or not the one asked for is a miss (removed), never a wrong
number; a write goes to a temporary file renamed into place, so a killed worker leaves no half entry (its stray
file is removed once an hour old).
Entries are evicted least recently used first (a hit touches its file's time) to stay under the size cap.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import uuid
from pathlib import Path

import numpy as np

from ..cache.entry import Crc32, EntryLayout

LAYOUT = EntryLayout(b"SGSCHIN2", Crc32, 4)
_SUFFIX, _PART = ".entry", ".part"
#: A temporary file older than this is an interrupted write's.
STRAY_AGE_S = 3600.0
#: The longest key a client may send (`core.remote.server.parse_request` checks it).
MAX_KEY = 256


class InputCache:
    """Entries by key in `folder`, at most `size_limit` bytes (one entry at most a quarter of it)."""

    def __init__(self, folder: Path, size_limit: int):
        self.folder, self.size_limit = Path(folder), int(size_limit)
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # users' images
        self._warned = False
        self._total: int | None = None  # the entries' bytes as this worker counts them (None: list the folder)
        now = time.time()
        for path in self.folder.glob(f"*{_PART}"):
            try:
                if now - path.stat().st_mtime >= STRAY_AGE_S:
                    path.unlink()
            except OSError:
                continue

    def _path(self, key: str) -> Path:
        return self.folder / (hashlib.blake2b(key.encode("utf-8"), digest_size=16).hexdigest() + _SUFFIX)

    def holds(self, key: str) -> bool:
        """Whether an entry is stored under `key` (unchecked: `get` checks it)."""
        return self._path(key).is_file()

    def get(self, key: str) -> bytes | np.ndarray | None:
        """The checked entry under `key`, or None (a damaged one is removed)."""
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                entry = LAYOUT.read(f, key)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._warn(f"cannot read {path} ({exc.strerror or exc})")
            return None
        if entry is None or len(entry.arrays) != 1:
            self._warn(f"a damaged entry ({path.name}) was removed; its image is sent again")
            self._remove(path)
            return None
        try:
            os.utime(path)  # recently used: evicted last
        except OSError:
            pass
        return entry.arrays[0].tobytes() if entry.meta.get("bytes") else entry.arrays[0]

    def put(self, key: str, value: bytes | np.ndarray) -> None:
        """Store `value` under `key` (atomically; the least recently used evicted to make room). Nothing is stored
        where it is over a quarter of the cap or cannot be written (said once on stderr)."""
        array = value if isinstance(value, np.ndarray) else np.frombuffer(value, np.uint8)
        parts = LAYOUT.parts(key, [array], {} if isinstance(value, np.ndarray) else {"bytes": True})
        size = sum(len(part) for part in parts)
        if size > self.size_limit // 4:
            return
        target = self._path(key)
        temporary = target.with_name(f"{target.name}.{uuid.uuid4().hex[:8]}{_PART}")
        try:
            self._make_room(size)
            with open(temporary, "wb") as f:
                for part in parts:
                    f.write(part)
            os.replace(temporary, target)
        except OSError as exc:
            self._remove(temporary)
            self._warn(f"cannot store an input ({exc.strerror or exc}); the run goes on without it")

    def _make_room(self, size: int) -> None:
        """Evict the least recently used entries until `size` more bytes fit under the cap. The folder is listed
        only when the bytes this worker knows of would pass the cap (a dataset of many small files does not
        list it per image); a second worker's writes are found then."""
        if self._total is not None and self._total + size <= self.size_limit:
            self._total += size
            return
        entries = []
        for entry in os.scandir(self.folder):
            if entry.name.endswith(_SUFFIX):
                try:
                    found = entry.stat()
                except OSError:
                    continue
                entries.append((found.st_mtime, found.st_size, entry.path))
        total = sum(size for _, size, _ in entries)
        for _, taken, path in sorted(entries):
            if total + size <= self.size_limit:
                break
            self._remove(Path(path))
            total -= taken
        self._total = total + size

    @staticmethod
    def _remove(path: Path) -> None:
        try:
            path.unlink()
        except OSError:
            pass

    def _warn(self, text: str) -> None:
        if not self._warned:
            self._warned = True
            sys.stderr.write(f"segscope worker: input cache {self.folder}: {text}\n")

