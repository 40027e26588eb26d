"""What the command line prints besides its results: the progress bar and SegScope's warnings as lines."""

from __future__ import annotations

import logging
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


class WarningLines(logging.Handler):
    """SegScope's warnings (e.g. a mask that does not follow the conventions) as `segscope: warning:` lines
    on the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"segscope: warning: {record.getMessage()}", file=sys.stderr)


def log_warnings() -> None:
    logger = logging.getLogger("segscope")
    if not any(isinstance(h, WarningLines) for h in logger.handlers):
        logger.addHandler(WarningLines(logging.WARNING))
    logger.setLevel(logging.WARNING)
