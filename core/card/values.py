"""Values as typed: the `card` command's flags and the viewer's Open model dialog (argparse types, so
`segscope card`'s parser is built without importing the card builder)."""

from __future__ import annotations

import argparse
import math


def parse_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give WxH, e.g. 352x352") from None
    return width, height


def parse_number(text: str) -> float:
    try:
        num, _, den = text.partition("/")
        value = float(num) / (float(den) if den else 1.0)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number, e.g. 0.00392 or 1/255") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number, e.g. 0.00392 or 1/255")
    return value


def parse_positive(text: str) -> float:
    value = parse_number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be > 0 (the net sees pixel * scale / std)")
    return value


def parse_numbers(text: str) -> tuple[float, ...]:
    return tuple(parse_number(v) for v in text.split(","))


def parse_positives(text: str) -> tuple[float, ...]:
    return tuple(parse_positive(v) for v in text.split(","))


def parse_classes(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r}: give names separated by commas, e.g. background,crack")
    return names
