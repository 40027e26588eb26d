"""Errors a user can act on.

Every `SegScopeError` message is one line that names the file or field and says what is wrong; the CLI
prints it as is (exit code 2) and the GUI shows it in its message area. Anything else escaping is a bug;
`describe` tells the two apart for both front ends. An error about one option carries it as `option`
(`SegScopeError("must be a positive number", option="--output-scale")`), so each front end words it in its
own terms: the CLI prints the flag, the viewer its control's label.
The one line holds by construction: line breaks and other control characters in a message (a library's
multi-line dump quoted in it) become spaces, and a run of text too long to read (a 1,000,000-character
value from a hostile file) is cut in the middle, with its length said.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Characters of one unbroken run (a value, a path) kept in a message; longer runs are cut in the middle.
MAX_RUN = 200
#: Characters of a whole message.
MAX_MESSAGE = 2000
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_LONG_RUN = re.compile(rf"\S{{{MAX_RUN + 1},}}")


def _cut(text: str, keep: int) -> str:
    half = keep // 2
    return f"{text[:half]}…({len(text):,} characters)…{text[-half // 4:]}"


def one_line(text: str) -> str:
    """`text` as one readable line: control characters as spaces, overlong runs and messages cut short."""
    text = _CONTROL.sub(" ", text).strip()
    text = _LONG_RUN.sub(lambda m: _cut(m.group(0), MAX_RUN // 2), text)
    return _cut(text, MAX_MESSAGE // 2) if len(text) > MAX_MESSAGE else text


def first_line(exc: BaseException) -> str:
    """The first line of a library's exception text (OpenVINO's and ONNX Runtime's run to pages)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


class SegScopeError(Exception):
    """Bad input or configuration: the message names the file/field and what to do. With `option`, the
    message says what is wrong with that option, and the error reads "<option>: <message>"."""

    def __init__(self, message: object = "", *args: object, option: str | None = None):
        self.option, self.reason = option, one_line(str(message))
        super().__init__(f"{option}: {self.reason}" if option else self.reason, *args)


class InputError(SegScopeError):
    """A file (or a host's reply) that cannot be used: "<source>[:line:column]: <detail>".

    `detail` keeps the message without the source (the position spelt out), for lines that name the file
    themselves (`segscope check`)."""

    def __init__(self, source: object, detail: str, position: tuple[int, int] | None = None):
        where = f"{source}:{position[0]}:{position[1]}" if position else str(source)
        super().__init__(f"{where}: {detail}")
        self.source, self.position = str(source), position
        self.detail = one_line(f"{detail} (line {position[0]}, column {position[1]})" if position else detail)
        self.problem = detail

    def __reduce__(self) -> tuple[object, ...]:  # pickled by Dask between a worker and the client
        return type(self), (self.source, self.problem, self.position)


class Refusals(SegScopeError):
    """Several inputs refused at once (`lines`: one line each, in order), so one run names them all; its message is
    the one line when there is one, else a count of them. The CLI prints each line, then the message."""

    def __init__(self, lines: Sequence[str], what: str):
        self.lines = tuple(lines)
        super().__init__(self.lines[0] if len(self.lines) == 1 else
                         f"{len(self.lines):,} {what} are refused (each named above): fix them and run again")


class BackendError(SegScopeError):
    """An inference backend failed (SDK return code, remote worker, model run)."""


class CancelledError(SegScopeError):
    """The user cancelled a running request."""


class ApiUnavailable(BackendError):
    """An Ascend API (the MindX SDK, its Model API, ais_bench) is not installed or not importable here."""


@dataclass(frozen=True)
class Description:
    """How a front end reports a failure: a user error (`bug` False) is its one line (its details the same, with
    the command-line flag an option's label stands for); anything else is a bug, its line "<type>: <text>" and its
    traceback in `details`."""

    bug: bool
    line: str
    details: str


def describe(exc: BaseException, labels: Mapping[str, str] | None = None) -> Description:
    """User error or bug? An error's option is worded by `labels` (the viewer's control for each flag);
    without a label it stays the flag, as the CLI prints it."""
    if isinstance(exc, SegScopeError):
        label = (labels or {}).get(exc.option or "")
        line = f"{label}: {exc.reason}" if label else str(exc)
        on_the_command_line = f"\n(on the command line: {exc.option})" if label else ""
        return Description(False, line, line + on_the_command_line)  # no class name: the user's words only
    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))  # 3.9: three arguments
    return Description(True, f"{type(exc).__name__}: {exc}", details)
