"""An exclusive lock on a folder, held through a lock file in it or beside it (`flock` on POSIX, `msvcrt` on
Windows).

The lock is refused at once, not waited for: two writers into one folder are a mistake to report (a short
read-modify-write may `wait` a few seconds instead). A lock file a killed process left is free (the lock ends
with its process) and is taken as any other. The lock file is removed on release; an acquirer checks that the
file it locked is still the one at the path, so a release racing with a new acquirer never lets two hold it.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from ..errors import SegScopeError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]
    import msvcrt


class FolderLock:
    """The lock file `path` of `folder` (by default the folder holding it); `what` names the holder in the
    refusal ("another export ... is writing")."""

    def __init__(self, path: Path, what: str = "export", folder: Path | None = None):
        self.path, self.what = Path(path), what
        self.folder = Path(folder) if folder is not None else self.path.parent
        self._fd: int | None = None

    def _try_lock(self, fd: int) -> bool:
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def acquire(self, wait: float = 0.0) -> FolderLock:
        """Take the lock (trying for up to `wait` seconds) or raise naming the holder (its process id, as it
        wrote it)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as exc:
                raise SegScopeError(f"{self.path.parent}: cannot write here ({exc.strerror}); "
                                    "choose another folder") from None
            if not self._try_lock(fd):
                if time.monotonic() < deadline:
                    os.close(fd)
                    time.sleep(0.02)
                    continue
                try:
                    holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
                except OSError:
                    holder = "?"
                os.close(fd)
                raise SegScopeError(f"{self.folder}: another {self.what} (process {holder}) is writing into this "
                                    "folder; wait for it to finish or choose another folder")
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except OSError:
                same = False
            if same:
                break
            os.close(fd)  # released and removed meanwhile: lock the new file
        self._fd = fd
        with contextlib.suppress(OSError):  # only names the holder in a refusal: a full disk must not leak the lock
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        return self

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        if self._fd is None:
            return
        if fcntl is not None:
            self.path.unlink(missing_ok=True)  # while still locked, see the module docstring
        os.close(self._fd)
        self._fd = None
        if fcntl is None:
            try:
                self.path.unlink()
            except OSError:
                pass  # another process holds it open
