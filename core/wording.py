"""How SegScope words counts in messages, for the command line and the viewer alike."""

from __future__ import annotations

from collections.abc import Sequence


def plural(n: int, noun: str) -> str:
    """"1 image", "3 images"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def class_name(class_names: Sequence[str], index: int) -> str:
    """A class by the model's name for it, "class 3" where the model names fewer classes."""
    return class_names[index] if 0 <= index < len(class_names) else f"class {index}"
