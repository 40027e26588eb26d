"""What C libraries write to the process's standard error (libpng's "libpng error: ..."), kept off the
terminal while an image is decoded: a refused file is reported in SegScope's one line instead."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from typing import IO

_stderr_lock = threading.Lock()
_stderr_users = 0
_stderr_saved: tuple[int, IO[bytes]] | None = None


@contextlib.contextmanager
def native_stderr_captured() -> Iterator[None]:
    """Send what C libraries write to file descriptor 2 (libpng's "libpng error: ...") to a scratch file
    while the block runs; other lines written meanwhile are passed on afterwards."""
    global _stderr_users, _stderr_saved
    with _stderr_lock:
        if _stderr_users == 0:
            try:
                scratch = tempfile.TemporaryFile()
                saved = os.dup(2)
                os.dup2(scratch.fileno(), 2)
                _stderr_saved = (saved, scratch)
            except OSError:
                _stderr_saved = None
        _stderr_users += 1
    try:
        yield
    finally:
        with _stderr_lock:
            _stderr_users -= 1
            if _stderr_users == 0 and _stderr_saved is not None:
                saved, captured = _stderr_saved
                _stderr_saved = None
                os.dup2(saved, 2)
                os.close(saved)
                captured.seek(0)
                kept = [line for line in captured.read().splitlines(keepends=True)
                        if not line.startswith((b"libpng ", b"libtiff", b"[ WARN", b"[ERROR"))]
                captured.close()
                if kept:
                    os.write(2, b"".join(kept))
