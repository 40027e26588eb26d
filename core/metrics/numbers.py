"""How documents write numbers JSON cannot hold, in one place (`eval --json`, metrics.json, `compare --json`):
NaN ("n/a": the metric does not apply, or a mean over nothing) is `null`; an infinite value (HD95 with the class
in only one mask, an infinite relative error) is the string `"inf"` (`"-inf"`), so the two never read the same.
metrics.csv writes n/a as an empty cell and infinity as `inf`. `core.metrics.catalogue.NUMBERS` states this in
each document."""

from __future__ import annotations

import math

INFINITY = "inf"


def json_safe(value: object) -> object:
    """`value` with NaN as None and infinities as "inf" / "-inf", in dicts, lists and tuples too."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else INFINITY if value > 0 else f"-{INFINITY}"
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
