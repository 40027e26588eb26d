"""A metrics document (`eval --json`, an export's metrics.json) written as a run makes it: its first key's list one
element at a time, the other keys once the run is over, so a run of 100,000 images never holds its rows. The text
is, byte for byte, what `json.dumps(json_safe(document), indent=2, allow_nan=False)` makes of the whole document."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from .numbers import json_safe


def _dumps(value: object) -> str:
    return json.dumps(json_safe(value), indent=2, allow_nan=False)


class StreamedDocument:
    """`{key: [elements...], **rest}` written through `write`: `add` each element in order, then `close` with the
    rest (written nothing before the first element or `close`)."""

    def __init__(self, write: Callable[[str], object], key: str):
        self._write, self._key, self.count = write, key, 0

    def add(self, element: object) -> None:
        indented = "    " + _dumps(element).replace("\n", "\n    ")  # one list level inside the document
        self._write((f"{{\n  {json.dumps(self._key)}: [\n" if not self.count else ",\n") + indented)
        self.count += 1

    def close(self, rest: Mapping[str, object]) -> None:
        """The keys after the list, in order, and the document's end (no newline after it)."""
        end = "\n  ]" if self.count else f"{{\n  {json.dumps(self._key)}: []"
        others = _dumps(dict(rest))[2:-2] if rest else ""  # its keys one level in: "{\n" ... "\n}" taken off
        self._write(end + (f",\n{others}" if others else "") + "\n}")
