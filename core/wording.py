"""How SegScope words counts in messages, for the command line and the viewer alike."""

from __future__ import annotations


def plural(n: int, noun: str) -> str:
    """"1 image", "3 images"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
