"""Regions of interest in slide pixel coordinates."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SegScopeError

#: The ROI the original `main.py` used for every image (x0, y0, x1, y1).
ORIGINAL_DEFAULT_ROI = (2200, 1000, 4000, 2800)


@dataclass(frozen=True)
class Roi:
    """A box `[x0, x1) x [y0, y1)` in slide pixels, as MindX's `RoiBox` and the opencv crop use it."""

    x0: int
    y0: int
    x1: int
    y1: int

    @property
    def width(self) -> int:
        return self.x1 - self.x0

    @property
    def height(self) -> int:
        return self.y1 - self.y0

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.x0, self.y0, self.x1, self.y1)

    def fits(self, width: int, height: int) -> bool:
        return 0 <= self.x0 < self.x1 <= width and 0 <= self.y0 < self.y1 <= height

    def clamped(self, width: int, height: int) -> Roi:
        """This box moved (not shrunk, where possible) to lie inside a `width` x `height` image."""
        w, h = min(self.width, width), min(self.height, height)
        x0 = min(max(self.x0, 0), width - w)
        y0 = min(max(self.y0, 0), height - h)
        return Roi(x0, y0, x0 + w, y0 + h)

    def intersection(self, other: Roi) -> Roi | None:
        """The part of this box inside `other` (None: they do not overlap)."""
        box = Roi(max(self.x0, other.x0), max(self.y0, other.y0), min(self.x1, other.x1), min(self.y1, other.y1))
        return box if box.x0 < box.x1 and box.y0 < box.y1 else None

    @classmethod
    def whole(cls, width: int, height: int) -> Roi:
        return cls(0, 0, width, height)

    @classmethod
    def parse(cls, text: str, field: str = "--roi") -> Roi:
        """Parse `x0,y0,x1,y1`; the error names `field`."""
        parts = [p.strip() for p in text.split(",")]
        try:
            x0, y0, x1, y1 = (int(p) for p in parts)
        except ValueError:
            raise SegScopeError(f"expected four integers x0,y0,x1,y1, got {text!r}", option=field) from None
        roi = cls(x0, y0, x1, y1)
        roi.validate(field)
        return roi

    def validate(self, field: str = "roi") -> None:
        if self.x0 < 0 or self.y0 < 0 or self.x1 <= self.x0 or self.y1 <= self.y0:
            raise SegScopeError(f"{field}: {self.as_tuple()} is not a box with 0 <= x0 < x1 and 0 <= y0 < y1")

    def __str__(self) -> str:
        return f"{self.x0},{self.y0},{self.x1},{self.y1}"
