"""The Profile dock's plots: a timeline drawn as one batched item, and the roofline.

The timeline of a model with thousands of kernels stays fluid because it is one `GraphicsObject` whose
`paint` issues one `drawRects` per operator type (a handful of calls per frame, whatever the zoom), with
hover answered by a binary search per lane instead of thousands of items each with its own tooltip.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter
from PySide6.QtWidgets import QToolTip

from ...core.profiling.machine import MachinePeak
from ...core.profiling.model import OpStat, TimelineEvent
from ...core.profiling.roofline import COMPUTE, FAR_BELOW, MEMORY, RooflinePoint, classify
from ..widgets import colormaps

BOUND_COLORS = {COMPUTE: colormaps.BLUE, MEMORY: colormaps.ORANGE, FAR_BELOW: colormaps.VERMILLION}
LANE_HEIGHT = 0.8


class TimelineItem(pg.GraphicsObject):
    """Every event as a rectangle at (start, lane), coloured by operator type."""

    def __init__(self, events: Sequence[TimelineEvent]) -> None:
        super().__init__()
        self.events = list(events)
        types = sorted({e.type for e in self.events})
        self.colors = {t: QColor(*colormaps.series_color(i)) for i, t in enumerate(types)}
        self.rects: dict[str, list[QRectF]] = {t: [] for t in types}
        for e in self.events:
            self.rects[e.type].append(QRectF(e.start_ms, e.lane - LANE_HEIGHT / 2, e.dur_ms, LANE_HEIGHT))
        self._lanes: dict[int, tuple[np.ndarray, np.ndarray, list[TimelineEvent]]] = {}
        for lane in sorted({e.lane for e in self.events}):
            ordered = sorted((e for e in self.events if e.lane == lane), key=lambda e: e.start_ms)
            self._lanes[lane] = (np.array([e.start_ms for e in ordered]),
                                 np.array([e.start_ms + e.dur_ms for e in ordered]), ordered)
        end = max((e.start_ms + e.dur_ms for e in self.events), default=1.0)
        lanes = max((e.lane for e in self.events), default=0)
        self._bounds = QRectF(0.0, -0.5, end, lanes + 1.0)

    def boundingRect(self) -> QRectF:  # noqa: N802 (Qt's name)
        return self._bounds

    def paint(self, painter: QPainter, *args: object) -> None:
        painter.setPen(Qt.PenStyle.NoPen)
        for op_type, rects in self.rects.items():
            painter.setBrush(QBrush(self.colors[op_type]))
            painter.drawRects(rects)

    def event_at(self, x: float, y: float, slack: float = 0.0) -> TimelineEvent | None:
        """The event under (x ms, y lane), or the nearest one within `slack` ms (thin events at low zoom)."""
        lane = self._lanes.get(int(round(y)))
        if lane is None or abs(y - round(y)) > LANE_HEIGHT / 2:
            return None
        starts, ends, ordered = lane
        i = int(np.searchsorted(starts, x, side="right")) - 1
        candidates = [j for j in (i, i + 1) if 0 <= j < len(ordered)]
        best = min(candidates, key=lambda j: max(starts[j] - x, x - ends[j], 0.0), default=None)
        if best is None or max(starts[best] - x, x - ends[best], 0.0) > slack:
            return None
        return ordered[best]


class _Plot(pg.PlotWidget):
    """A plot of the Profile dock: its axes named, no context menu (pyqtgraph's export and plot options)."""

    def __init__(self, bottom: str, left: str) -> None:
        super().__init__()
        self.setMenuEnabled(False)
        self.setLabel("bottom", bottom)
        self.setLabel("left", left)


class TimelinePlot(_Plot):
    """Zoom and pan along time (wheel, drag); hovering an event shows its full name, type and time."""

    def __init__(self) -> None:
        super().__init__("time from the run's start (ms)", "run / stream")
        self.setMouseEnabled(x=True, y=False)  # no grid: its full-height lines cost more per frame than 6000 kernels
        self.item: TimelineItem | None = None
        self.hovered: TimelineEvent | None = None
        self.scene().sigMouseMoved.connect(self._hover)

    def set_events(self, events: Sequence[TimelineEvent]) -> None:
        if self.item is not None:
            self.removeItem(self.item)
        self.item = TimelineItem(events) if events else None
        if self.item is None:
            self.setTitle("")
            return
        self.addItem(self.item)
        lanes = sorted({e.lane for e in events})
        self.getAxis("left").setTicks([[(lane, str(lane)) for lane in lanes]])
        self.setTitle("  ".join(f"<span style='color:{color.name()}'>&#9632;</span> {op_type}"
                                for op_type, color in self.item.colors.items()), size="8pt")
        self.autoRange()

    def _hover(self, pos: QPointF) -> None:
        if self.item is None:
            return
        point = self.plotItem.vb.mapSceneToView(pos)
        pixel = self.plotItem.vb.viewPixelSize()[0]
        event = self.item.event_at(point.x(), point.y(), slack=2 * pixel)
        self.hovered = event
        if event is None:
            QToolTip.hideText()
            return
        QToolTip.showText(self.mapToGlobal(self.mapFromScene(pos)),
                          f"{event.name}\n{event.type}: {event.dur_ms:.4g} ms at {event.start_ms:.4g} ms "
                          f"(lane {event.lane})", self)


class RooflinePlot(_Plot):
    """Achieved GFLOP/s against arithmetic intensity (log-log) under the measured roofs."""

    def __init__(self) -> None:
        super().__init__("arithmetic intensity (FLOP/byte)", "achieved GFLOP/s")
        self.setLogMode(x=True, y=True)
        self.showGrid(x=True, y=True, alpha=0.2)
        self.points: list[tuple[OpStat, RooflinePoint]] = []

    def set_ops(self, ops: Sequence[OpStat], peak: MachinePeak | None) -> None:
        self.clear()
        self.points = []
        if peak is None:
            return
        for op in ops:
            point = classify(op, peak) if op.flops > 0 else None  # data movement has no place on a log axis
            if point is not None:
                self.points.append((op, point))
        intensities = [p.intensity for _, p in self.points] or [peak.ridge]
        low, high = min(min(intensities), peak.ridge) / 4, max(max(intensities), peak.ridge) * 4
        xs = np.array([low, peak.ridge, high])
        self.plot(xs, np.minimum(xs * peak.bandwidth_gbs, peak.peak_gflops),  # the plot item takes the logs
                  pen=pg.mkPen((200, 200, 200), width=2))
        self.setTitle(f"roofs measured here: {peak.peak_gflops:.1f} GFLOP/s, {peak.bandwidth_gbs:.1f} GB/s (ridge "
                      f"{peak.ridge:.2f} FLOP/B); blue compute-bound, orange memory-bound, red far below both",
                      size="8pt")
        spots = [{"pos": (math.log10(p.intensity), math.log10(max(p.gflops, 1e-6))),
                  "data": f"{op.name}\n{op.type}: {p.gflops:.3g} GFLOP/s at {p.intensity:.3g} FLOP/B, "
                          f"{p.efficiency:.0%} of its roof ({p.bound})",
                  "brush": pg.mkBrush(*BOUND_COLORS[p.bound])}
                 for op, p in self.points]
        # A scatter item is not put in log mode by the plot: its positions are given as log10 already.
        scatter = pg.ScatterPlotItem(size=9, pen=None, hoverable=True, tip=lambda x, y, data: data)
        scatter.addPoints(spots)
        self.addItem(scatter)
        self.scatter = scatter
