"""Extra result views, by registry: a new view is one module of this package that calls `register`.

A `ResultView` turns a result (and the ground truth, when it needs it) into one float image in [0, 1], at
model or ROI resolution, named and described here without Qt; the viewer draws each with its colour map
beside the three core panels (heatmap | argmax | ground truth) under View > Panels (`gui.result_views`), and
any headless caller (an export, a report) can compute the same images. Every module of this package is
imported by `load_views()`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..result import InferenceResult


@dataclass(frozen=True)
class ResultView:
    name: str
    title: str
    tooltip: str
    #: (result, the chosen class, the truth's class ids at ROI resolution or None) -> H x W float image in [0, 1]
    #: covering the ROI (at model or ROI resolution)
    image: Callable[[InferenceResult, int, np.ndarray | None], np.ndarray]
    colormap: str = "magma"  # a colour map's name (the viewer's are pyqtgraph's, nothing is downloaded)


RESULT_VIEWS: dict[str, ResultView] = {}


def register(view: ResultView) -> ResultView:
    """Add a view (a module-level call in its module of this package)."""
    RESULT_VIEWS[view.name] = view
    return view


def load_views() -> dict[str, ResultView]:
    """Import every module of this package (each registers itself); the registry."""
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    return RESULT_VIEWS
