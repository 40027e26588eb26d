"""What the command line says on stderr besides its error line: `segscope: note:` and `segscope: warning:` lines.

They are held until the command's first line of output (or its successful end), then printed in order, so a
command that fails prints its one error line alone, and a command that works prints its notes and warnings
before the results they belong to. Library warnings reach it through the `segscope` logger.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from .errors import one_line


class HeldLines(logging.Handler):
    """The held lines; `show` prints them and lets later ones through at once."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.held: list[str] | None = []

    def emit(self, record: logging.LogRecord) -> None:
        self.say(f"segscope: warning: {one_line(record.getMessage())}")

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


def install() -> None:
    """Route the `segscope` logger's warnings to `LINES`, holding from now on."""
    logger = logging.getLogger("segscope")
    if LINES not in logger.handlers:
        logger.addHandler(LINES)
    logger.setLevel(logging.WARNING)
    LINES.held = []
