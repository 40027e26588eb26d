"""The dataset filter ("soft_dice < 0.9 and recall >= 0.5") over the metrics of `core.metrics.catalogue`."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import SegScopeError
from . import catalogue
from .scores import ImageMetrics

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt,
}
_CONDITION = re.compile(r"\s*(\w+)\s*(<=|>=|==|!=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*")


@dataclass(frozen=True)
class MetricFilter:
    """Conditions joined by "and"; an image without metrics, or whose metric is n/a, matches none (it has
    nothing to compare)."""

    conditions: tuple[tuple[catalogue.Metric, str, float], ...]  # (metric, operator, value)

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
            try:
                metric = catalogue.lookup(name)
            except SegScopeError as exc:
                raise SegScopeError(f"filter: {exc}") from None
            conditions.append((metric, op, float(value)))
        return cls(tuple(conditions))

    def matches(self, metrics: ImageMetrics | None) -> bool:
        for metric, op, value in self.conditions:
            have = metric.of(metrics)
            if have is None or not _OPERATORS[op](have, value):
                return False
        return True
