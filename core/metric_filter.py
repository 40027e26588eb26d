"""The dataset filter ("soft_dice < 0.9 and recall >= 0.5") and the metrics images are ranked by."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from .errors import SegScopeError
from .metrics import ImageMetrics

#: Scalar metrics of `ImageMetrics` the user can rank, step and filter by (all: higher is better).
METRICS: dict[str, str] = {
    "soft_dice": "Soft Dice",
    "soft_iou": "Soft IoU",
    "foreground_dice": "Dice (foreground)",
    "foreground_iou": "IoU (foreground)",
    "precision": "Precision",
    "recall": "Recall",
}
#: Filter names matching the dataset table's column titles.
_ALIASES = {"dice": "foreground_dice", "iou": "foreground_iou"}
_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt,
}
_CONDITION = re.compile(r"\s*([A-Za-z_]+)\s*(<=|>=|==|!=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*")
#: Every name the filter accepts.
FILTER_NAMES = (*METRICS, *_ALIASES)


@dataclass(frozen=True)
class MetricFilter:
    """Conditions joined by "and"; an image without metrics matches none (it has nothing to compare)."""

    conditions: tuple[tuple[str, str, float], ...]  # (metric, operator, value)

    @classmethod
    def parse(cls, text: str) -> MetricFilter | None:
        """None for an empty text; SegScopeError naming the bad part otherwise."""
        if not text.strip():
            return None
        conditions = []
        for part in re.split(r"\band\b|&&?", text, flags=re.IGNORECASE):
            match = _CONDITION.fullmatch(part)
            if match is None:
                raise SegScopeError(f"filter: {part.strip()!r} is not '<metric> <op> <number>', "
                                    "e.g. 'soft_dice < 0.9'")
            name, op, value = match.groups()
            name = _ALIASES.get(name.lower(), name.lower())
            if name not in METRICS:
                raise SegScopeError(f"filter: unknown metric {match.group(1)!r}; use one of "
                                    f"{', '.join(FILTER_NAMES)}")
            conditions.append((name, op, float(value)))
        return cls(tuple(conditions))

    def matches(self, metrics: ImageMetrics | None) -> bool:
        return metrics is not None and all(_OPERATORS[op](getattr(metrics, name), value)
                                           for name, op, value in self.conditions)
