"""The undo and redo stacks of a session's ROI moves (of any of its images), bounded."""

from __future__ import annotations

from .roi import Roi

#: ROI moves remembered for undo, per session.
ROI_UNDO_LIMIT = 100

#: One move: (image id, the ROI before, the ROI after).
Move = tuple[str, Roi, Roi]


class RoiUndo:
    """`record` each move; `undo`/`redo` hand back the move to take back or take again (None: none left)."""

    def __init__(self, limit: int = ROI_UNDO_LIMIT) -> None:
        self.limit = limit
        self._undo: list[Move] = []
        self._redo: list[Move] = []

    def record(self, item_id: str, before: Roi, after: Roi) -> None:
        """A new move: the oldest beyond the limit is forgotten, and nothing is left to redo."""
        self._undo = [*self._undo, (item_id, before, after)][-self.limit :]
        self._redo.clear()

    def clear(self) -> None:
        self._undo.clear()
        self._redo.clear()

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    @property
    def can_redo(self) -> bool:
        return bool(self._redo)

    def undo(self) -> Move | None:
        if not self._undo:
            return None
        move = self._undo.pop()
        self._redo.append(move)
        return move

    def redo(self) -> Move | None:
        if not self._redo:
            return None
        move = self._redo.pop()
        self._undo.append(move)
        return move
