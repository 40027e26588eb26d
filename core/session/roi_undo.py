"""The undo and redo stacks of a session's ROI moves (of any of its images), bounded."""

from __future__ import annotations

from ..roi import Roi

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
        return self._shift(self._undo, self._redo)

    def redo(self) -> Move | None:
        return self._shift(self._redo, self._undo)

    @staticmethod
    def _shift(source: list[Move], target: list[Move]) -> Move | None:
        """The newest move of `source`, now the newest of `target`."""
        if not source:
            return None
        move = source.pop()
        target.append(move)
        return move
