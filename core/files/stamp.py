"""Optimistic concurrency for the files the viewer writes: remember what was read, check it before replacing.

A `Stamp` is a file's identity as read: size, modification time (ns) and inode, which any replacement
(`os.replace` of a temporary file, an editor's save) changes; with `content`, also its SHA-256, for programs
that rewrite a file in place keeping its size and time. A writer takes the stamps of what it read, and just
before its atomic replace `check_unchanged` compares them with the files as they are now: a difference is a
`WriteConflict` naming the other writer's file, and nothing is overwritten (the caller asks the user: keep
mine as a copy, take theirs, or overwrite). The check and the replace run under `short_lock`, so two
SegScope writers of one folder never pass the check together; another program is not bound by the lock,
and the remaining window is the few microseconds between the check and the rename.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import SegScopeError
from .folder_lock import FolderLock

#: How long a writer waits for another SegScope writer's short lock before giving up.
LOCK_WAIT_SECONDS = 10.0


@dataclass(frozen=True)
class Stamp:
    """A file as it was read; `missing` for a file that did not exist."""

    size: int = -1
    mtime_ns: int = -1
    inode: int = -1
    sha256: str = ""

    @property
    def missing(self) -> bool:
        return self.inode < 0

    @classmethod
    def of(cls, path: Path, content: bool = False) -> Stamp:
        """`path` as it is now (`missing` when there is no file)."""
        try:
            info = os.stat(path)
        except FileNotFoundError:
            return cls()
        except OSError as exc:
            raise SegScopeError(f"{path}: cannot read ({exc.strerror})") from None
        digest = ""
        if content:
            sha = hashlib.sha256()
            try:
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        sha.update(chunk)
            except OSError as exc:
                raise SegScopeError(f"{path}: cannot read ({exc.strerror})") from None
            digest = sha.hexdigest()
        return cls(info.st_size, info.st_mtime_ns, info.st_ino, digest)

    def same(self, now: Stamp) -> bool:
        """Whether `now` is still this file (content compared only when both hold it)."""
        if self.missing or now.missing:
            return self.missing == now.missing
        return ((self.size, self.mtime_ns, self.inode) == (now.size, now.mtime_ns, now.inode)
                and (not self.sha256 or not now.sha256 or self.sha256 == now.sha256))

    def describe(self) -> str:
        if self.missing:
            return "no file"
        return f"{self.size:,} bytes, modified {time.strftime('%H:%M:%S', time.localtime(self.mtime_ns / 1e9))}"


class WriteConflict(SegScopeError):
    """A file changed on disk after it was read: another viewer or program wrote `path`. Nothing was written."""

    def __init__(self, path: Path, read: Stamp, now: Stamp, writing: Path) -> None:
        self.path, self.read, self.now, self.writing = Path(path), read, now, Path(writing)
        change = "was deleted" if now.missing else "appeared" if read.missing else "was replaced"
        super().__init__(f"{path}: {change} by another viewer or program since it was read ({now.describe()}); "
                         f"{writing.name} was not written: keep yours as a copy, take theirs, or overwrite")


def check_unchanged(expected: Mapping[Path, Stamp], writing: Path) -> None:
    """Raise `WriteConflict` for the first file of `expected` that is not as it was read (`writing`: the file
    the caller is about to write, named in the message)."""
    for path, read in expected.items():
        now = Stamp.of(path, content=bool(read.sha256))
        if not read.same(now):
            raise WriteConflict(path, read, now, writing)


@contextlib.contextmanager
def short_lock(folder: Path, name: str = ".segscope-write.lock", what: str = "SegScope writer") -> Iterator[None]:
    """Serialise SegScope's read-check-replace of files in `folder` (a lock file there; waits up to
    `LOCK_WAIT_SECONDS`). A lock file a killed process left is free (`flock` ends with its process), so it is
    simply taken; its recorded process id only names a live holder in the refusal."""
    lock = FolderLock(Path(folder) / name, what, Path(folder)).acquire(wait=LOCK_WAIT_SECONDS)
    try:
        yield
    finally:
        lock.release()
