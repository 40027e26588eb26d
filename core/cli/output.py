"""What the command line prints besides its results: the progress bar, and the `segscope: note:` and
`segscope: warning:` lines on stderr.

The lines are held until the command's first line of output (or its successful end), then printed in order, so
a command that fails prints its one error line alone, and a command that works prints its notes and warnings
before the results they belong to. Library warnings reach them through the `segscope` logger.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from typing import TextIO

from ..errors import one_line

#: The exit code of a check that ran and failed: `compare`'s FAIL verdict, a drift `drift` found, `review --against`'s
#: parity gate (2 stays bad usage or bad input, 1 a bug).
EXIT_FAIL = 3


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


def cell(value: float, fmt: str) -> str:
    """A table cell: `value` in `fmt`, or n/a for NaN (not measured)."""
    return "n/a" if math.isnan(value) else format(value, fmt)


class HeldLines(logging.Handler):
    """The held lines; `show` prints them and lets later ones through at once."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.held: list[str] | None = []

    def emit(self, record: logging.LogRecord) -> None:
        (warning if record.levelno >= logging.WARNING else note)(record.getMessage())

    def say(self, line: str) -> None:
        if self.held is None:
            print(line, file=sys.stderr)
        else:
            self.held.append(line)

    def show(self) -> None:
        held, self.held = self.held or [], None
        for line in held:
            print(line, file=sys.stderr)

    def drop(self) -> None:
        """Forget what is held (the command failed: its error line says what matters)."""
        self.held = []


class ReleasingOutput:
    """`out`, showing the held lines before its first write."""

    def __init__(self, out: TextIO, lines: HeldLines):
        self._out, self._lines = out, lines

    def write(self, text: str) -> int:
        self._lines.show()
        return self._out.write(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self._out, name)


LINES = HeldLines()


def note(text: str) -> None:
    """A `segscope: note:` line on stderr (held as described in the module docstring)."""
    LINES.say(f"segscope: note: {one_line(text)}")


def warning(text: str) -> None:
    """A `segscope: warning:` line on stderr (held as described in the module docstring)."""
    LINES.say(f"segscope: warning: {one_line(text)}")


def status(text: str) -> None:
    """A `segscope: ...` line on stderr now (how a run went: per-device usage, where it stopped)."""
    print(f"segscope: {text}", file=sys.stderr)


def install() -> None:
    """Route the `segscope` logger's warnings (and its INFO records, as notes) to `LINES`, holding from now on."""
    logger = logging.getLogger("segscope")
    if LINES not in logger.handlers:
        logger.addHandler(LINES)
    logger.setLevel(logging.INFO)
    LINES.held = []
