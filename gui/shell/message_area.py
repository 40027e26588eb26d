"""The non-modal message area: a list of one-line messages and the details of the selected one."""

from __future__ import annotations

import time
from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QListWidget, QListWidgetItem, QPlainTextEdit, QSplitter, QVBoxLayout, QWidget

from ...core.session.session import Session

LEVEL_COLORS = {"info": QColor("#c8ccd2"), "warning": QColor("#f0c674"), "error": QColor("#ff7b72")}


@dataclass(frozen=True)
class Message:
    level: str  # "info", "warning", "error"
    text: str  # one line
    details: str
    when: float


class MessageArea(QWidget):
    """Messages newest last (the session's among them); `added(level)` lets the window raise the dock on
    errors."""

    added = Signal(str)

    def __init__(self, session: Session | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.messages: list[Message] = []
        self.list = QListWidget()
        self.list.setToolTip("Messages from runs, backends and files; select one to see its details")
        self.list.setWordWrap(True)  # long messages wrap instead of needing a horizontal scroll
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        self.details.setPlaceholderText("Select a message to see its details")
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.list)
        splitter.addWidget(self.details)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(splitter)
        self.list.currentRowChanged.connect(self._show_details)
        if session is not None:
            session.events.message.connect(lambda said: self.add(said.level, said.text, said.details))

    def add(self, level: str, text: str, details: str = "") -> None:
        message = Message(level, text.splitlines()[0] if text else "", details or text, time.time())
        self.messages.append(message)
        stamp = time.strftime("%H:%M:%S", time.localtime(message.when))
        item = QListWidgetItem(f"{stamp}  {level.upper():7}  {message.text}")
        item.setForeground(LEVEL_COLORS.get(level, LEVEL_COLORS["info"]))
        item.setToolTip(message.text)
        self.list.addItem(item)
        self.list.setCurrentRow(self.list.count() - 1)
        self.added.emit(level)

    def errors(self) -> list[Message]:
        return [m for m in self.messages if m.level == "error"]

    def _show_details(self, row: int) -> None:
        self.details.setPlainText(self.messages[row].details if 0 <= row < len(self.messages) else "")
