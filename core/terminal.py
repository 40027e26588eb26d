"""The command line's progress bar (its notes and warnings: `core.cli_lines`)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """A one-line progress bar with ETA on a terminal; silent otherwise."""

    def __init__(self, total: int, stream: TextIO | None = None):
        self.total, self.stream, self.start = total, stream or sys.stderr, time.monotonic()
        self.enabled = self.stream.isatty()

    def update(self, done: int, label: str) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / done * (self.total - done) if done else 0.0
        filled = int(30 * done / self.total)
        bar = "#" * filled + "." * (30 - filled)
        self.stream.write(f"\r[{bar}] {done}/{self.total} ETA {eta:4.0f}s {label[:30]:30}")
        self.stream.flush()

    def clear(self) -> None:
        """Blank the bar so a result line printed to the same terminal starts clean."""
        if self.enabled:
            self.stream.write("\r" + " " * 80 + "\r")
            self.stream.flush()
