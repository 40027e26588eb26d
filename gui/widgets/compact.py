"""Widgets that never make the window wider than a laptop screen: a label that elides what does not fit
(the whole text on hover) and combo boxes that shrink to a few characters, eliding their choice the same way.

A text cut here always shows "…" and is whole on hover (`hover_text`), which the screenshot tests check for
every text shown (tests/gui/screenshot.py)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QHelpEvent, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QLabel,
    QSizePolicy,
    QStyle,
    QStyleOptionComboBox,
    QStylePainter,
    QToolTip,
    QWidget,
)

#: Characters a shrunk combo box still shows (the list it opens shows every entry whole).
COMBO_CHARS = 8
#: The dynamic property of a widget that elides its text with "…" and shows it whole on hover.
ELIDES = "elides"


class ElidedLabel(QLabel):
    """One line of plain text, cut with "…" where it is too long for its place; its tooltip holds the whole
    text, then what the label is (`setToolTip`). Its width never holds the window open (minimum one
    character)."""

    def __init__(self, text: str = "", parent: QWidget | None = None,
                 mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight) -> None:
        super().__init__(text, parent)
        self._about = ""
        self._show_tooltip()
        self.mode = mode
        self.setProperty(ELIDES, True)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setMinimumWidth(self.fontMetrics().horizontalAdvance("…") * 3)

    def minimumSizeHint(self):  # noqa: N802 - Qt's name
        hint = super().minimumSizeHint()
        hint.setWidth(self.minimumWidth())
        return hint

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name
        if text != self.text():  # (the same text again: nothing to lay out or repaint)
            super().setText(text)
            self._show_tooltip()

    def setToolTip(self, about: str) -> None:  # noqa: N802 - Qt's name
        """What the label is: shown on hover after its whole text."""
        self._about = about
        self._show_tooltip()

    def _show_tooltip(self) -> None:
        text = self.text()
        parts = [text] if text and text not in self._about else []
        super().setToolTip("\n".join([*parts, self._about] if self._about else parts))

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        painter = QPainter(self)
        rect = self.contentsRect()
        text = self.fontMetrics().elidedText(self.text(), self.mode, rect.width())
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(rect, int(self.alignment()), text)


class _ElidedChoice(QObject):
    """Draws a combo box's current text cut with "…" where its field is too narrow (Qt cuts it bare), and
    puts the whole text before the combo's own tooltip on hover."""

    def eventFilter(self, combo: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if not isinstance(combo, QComboBox) or combo.isEditable():
            return False
        if event.type() == QEvent.Type.Paint:
            painter = QStylePainter(combo)
            option = QStyleOptionComboBox()
            combo.initStyleOption(option)
            if combo.currentIndex() < 0 and combo.placeholderText():  # as QComboBox.paintEvent draws it
                option.palette.setBrush(QPalette.ColorRole.ButtonText, option.palette.placeholderText())
                option.currentText = combo.placeholderText()
            painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, option)
            field = combo.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                                 QStyle.SubControl.SC_ComboBoxEditField, combo)
            icon = combo.iconSize().width() + 4 if not option.currentIcon.isNull() else 0
            option.currentText = combo.fontMetrics().elidedText(option.currentText, Qt.TextElideMode.ElideRight,
                                                                field.width() - icon)
            painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, option)
            return True
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            QToolTip.showText(event.globalPos(), hover_text(combo), combo)
            return True
        return False


def hover_text(widget: QWidget) -> str:
    """What `widget` shows on hover: a shrunk combo box's whole choice before its tooltip, else its tooltip."""
    if isinstance(widget, QComboBox) and widget.property(ELIDES) and widget.currentText():
        return "\n".join(part for part in (widget.currentText(), widget.toolTip()) if part)
    return widget.toolTip()


def shrinkable(combo: QComboBox, chars: int = COMBO_CHARS) -> QComboBox:
    """`combo` sized by `chars` characters instead of its longest entry, its choice elided where cut."""
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(chars)
    combo.setProperty(ELIDES, True)
    combo.installEventFilter(_ElidedChoice(combo))
    return combo
