"""Widgets that never make the window wider than a laptop screen: a label that elides what does not fit
(the whole text on hover) and combo boxes that shrink to a few characters."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QComboBox, QLabel, QSizePolicy, QWidget

#: Characters a shrunk combo box still shows (the list it opens shows every entry whole).
COMBO_CHARS = 8


class ElidedLabel(QLabel):
    """One line of plain text, cut with "…" where it is too long for its place; the whole text is its
    tooltip. Its width never holds the window open (minimum one character)."""

    def __init__(self, text: str = "", parent: QWidget | None = None,
                 mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight) -> None:
        super().__init__(text, parent)
        self.mode = mode
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setMinimumWidth(self.fontMetrics().horizontalAdvance("…") * 3)

    def minimumSizeHint(self):  # noqa: N802 - Qt's name
        hint = super().minimumSizeHint()
        hint.setWidth(self.minimumWidth())
        return hint

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        super().setText(text)
        self.setToolTip(text if text else "")

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        painter = QPainter(self)
        rect = self.contentsRect()
        text = self.fontMetrics().elidedText(self.text(), self.mode, rect.width())
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(rect, int(self.alignment()), text)


def shrinkable(combo: QComboBox, chars: int = COMBO_CHARS) -> QComboBox:
    """`combo` sized by `chars` characters instead of its longest entry."""
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(chars)
    return combo
