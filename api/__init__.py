"""SegScope: inspect, score and correct U-Net segmentations. As a library: `segscope.open(dataset, model=...)`
(`core/api.py`); the viewer and the CLI are `segscope.gui` and `segscope.core.cli`.

The API is imported when first used: every `segscope.*` import (the CLI's startup, the remote worker's) passes
through this package and must not load what the API runs (tests/core/test_cli_startup.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core.api import Analysis, open

__all__ = ["Analysis", "open"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from .core import api

        return getattr(api, name)
    raise AttributeError(f"module 'segscope' has no attribute {name!r}")
