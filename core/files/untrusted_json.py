"""JSON from files and hosts SegScope does not control, parsed within bounds.

Python's `json` accepts what JSON does not (`NaN`, `Infinity`), turns a 5000-digit integer into an error
of its own (or, before 3.11, into a number nothing downstream can convert), and recurses once per level of
nesting. Here nesting is measured before parsing (one linear, vectorised pass), number
literals are bounded in length and must be finite, and every refusal is one line naming the source and,
where the parser knows it, the line and column.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import InputError

#: Levels of nested arrays/objects accepted (SegScope's own documents nest a handful).
MAX_DEPTH = 64
#: Characters of one number literal (a 64-bit integer has 20 digits; a float's repr at most 24).
MAX_NUMBER_CHARS = 40
_STRUCTURE = np.zeros(256, bool)  # the bytes that matter for nesting
_STRUCTURE[list(b'"[]{}')] = True
_STEP = np.zeros(256, np.int8)  # how each byte changes the nesting level outside strings
_STEP[list(b"[{")], _STEP[list(b"]}")] = 1, -1


class _BadNumber(ValueError):
    pass


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON `text`, brackets inside strings skipped; a few
    vectorised passes, no recursion."""
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
    positions = np.flatnonzero(_STRUCTURE[data])
    tokens = data[positions]
    quotes = tokens == ord('"')
    slashes = np.flatnonzero(data == ord("\\"))
    if slashes.size:  # a quote after an odd run of backslashes is escaped: not a delimiter
        runs = slashes[np.r_[True, np.diff(slashes) != 1]]  # where each run of backslashes starts
        candidates = np.flatnonzero(quotes)
        candidates = candidates[data[positions[candidates] - 1] == ord("\\")]
        start = runs[np.searchsorted(runs, positions[candidates] - 1, side="right") - 1]
        quotes[candidates[(positions[candidates] - start) % 2 == 1]] = False
    outside = (np.cumsum(quotes, dtype=np.uint8) & 1) == 0  # wraps at 256: the parity stays
    return int(np.cumsum(_STEP[tokens] * outside, dtype=np.int64).max(initial=0))


def _integer(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _BadNumber(f"an integer of {len(text) - text.startswith('-'):,} digits is out of range")
    return int(text)


def _float(text: str) -> float:
    value = float(text) if len(text) <= MAX_NUMBER_CHARS else float("inf")
    if value in (float("inf"), float("-inf")):
        raise _BadNumber(f"the number {text[:20]}{'...' if len(text) > 20 else ''} is out of range")
    return value


def _constant(name: str) -> float:
    raise _BadNumber(f"{name} is not a JSON number (JSON has no NaN or infinities)")


def parse_json(text: str, source: object, max_depth: int = MAX_DEPTH) -> object:
    """The value of JSON `text` (a leading byte-order mark skipped, as the SDK's parser does); refusals
    (`InputError`) name `source`: invalid JSON, nesting over `max_depth`, an out-of-range number."""
    text = text[1:] if text.startswith("\ufeff") else text
    depth = json_depth(text)
    if depth > max_depth:
        raise InputError(source, f"JSON nested {depth:,} levels deep, over the limit of {max_depth}: is it the "
                                 "right file?")
    try:
        return json.loads(text, parse_int=_integer, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"invalid JSON: {exc.msg}", (exc.lineno, exc.colno)) from None
    except _BadNumber as exc:
        raise InputError(source, f"invalid JSON: {exc}") from None
