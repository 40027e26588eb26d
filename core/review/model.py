"""The viewer's review queue as a Qt-free model: every image's entries as the session scores it (`set_image`,
O(that image's entries) per change), one order over the dataset (best first, `core.review.queue`), the entry on
screen (`current`, evented), each entry's standing decision (kept in the review log across sessions), and the
reviewer's commands: `step` to the next or previous entry not yet decided, `go_to` one, `decide` (the decision
applied by the caller's `apply`, the mask document's `review_decision`, then logged, then on to the next), and
`undo`.

The log is read and written where the caller says: by default here, at once (`set_log` reads it, each decision is
on disk when `decide` returns); with `read=False` and `deferred`, a worker reads it (`adopt_log`: this session's
decisions taken meanwhile stay on top) and flushes the decisions (`writer.flush`, asked for by `write_due`).

A view draws from it and dispatches keys to it; it never holds queue state itself.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Optional

from ..events import Evented, Signal, SignalGroup
from .log import UNDO, Decision, LogWriter, ReviewLog
from .queue import ReviewEntry

#: Decisions `undo` can take back, the last first.
UNDO_DEPTH = 100


class QueueEvents(SignalGroup):
    #: The entries or their decisions changed.
    changed = Signal()
    #: The entry on screen: (new, old), either None.
    current = Signal(object, object)
    #: A decision waits in `writer` (deferred writes): flush it on a worker.
    write_due = Signal()


class ReviewQueueModel:
    current = Evented[Optional[ReviewEntry]](None)

    def __init__(self, log: ReviewLog | None = None, who: str | None = None, deferred: bool = False):
        self.events = QueueEvents()
        self.log: ReviewLog | None = None
        self.writer: LogWriter | None = None
        self.deferred = deferred  # decisions wait in `writer` for a worker's flush (`write_due`)
        self.who = who  # None: the login name
        self._by_image: dict[str, list[ReviewEntry]] = {}
        self._order: list[tuple[tuple, str]] = []  # (rank, key), best first
        self._entries: dict[str, ReviewEntry] = {}  # by key
        self._standing: dict[str, list[str]] = {}  # each key's decisions, the standing one last
        #: This session's last decisions, for undo: each entry and what its `apply` returned.
        self._history: list[tuple[ReviewEntry, object]] = []
        self._unread: list[tuple[str, str]] | None = None  # this session's decisions while the log is being read
        self.set_log(log)

    def set_log(self, log: ReviewLog | None, read: bool = True) -> None:
        """Another dataset's log (None: none): no entry, and the log's decisions standing, read here (`read`) or
        handed to `adopt_log` once a worker read them."""
        self.log = log
        self.writer = LogWriter(log) if log is not None else None
        self._standing.clear()
        self._unread = None
        if log is not None:
            if read:
                self._replay(log.read())
            else:
                self._unread = []
        self.clear()

    @property
    def reading(self) -> bool:
        """Whether the log's decisions are still being read (`adopt_log` to come)."""
        return self._unread is not None

    def adopt_log(self, log: ReviewLog, decisions: list[Decision]) -> None:
        """The decisions a worker read from `log` (ignored if another log is set since): they stand, under this
        session's decisions taken meanwhile (the worker read before any of them was written)."""
        if log is not self.log or self._unread is None:
            return
        meanwhile, self._unread = self._unread, None
        self._standing.clear()
        self._replay(decisions)
        for key, decision in meanwhile:
            self._remember(key, decision)
        self.events.changed.emit()

    def _replay(self, decisions: list[Decision]) -> None:
        for decision in decisions:
            self._remember(decision.entry, decision.decision)

    # --- entries -----------------------------------------------------------------------------------------

    def set_image(self, image: str, entries: Sequence[ReviewEntry]) -> None:
        """The image's entries now (after a run, a re-score, a decision): they replace its earlier ones."""
        for old in self._by_image.pop(image, []):
            del self._order[bisect.bisect_left(self._order, (old.rank(), old.key))]
            del self._entries[old.key]
        kept = [e for e in entries if e.key not in self._entries]  # (two entries of one key: the first)
        for entry in kept:
            bisect.insort(self._order, (entry.rank(), entry.key))
            self._entries[entry.key] = entry
        if kept:
            self._by_image[image] = kept
        self.events.changed.emit()

    def clear(self) -> None:
        """Another dataset: no entry."""
        self._by_image.clear()
        self._order.clear()
        self._entries.clear()
        self._history.clear()
        self.current = None
        self.events.changed.emit()

    def entries(self) -> list[ReviewEntry]:
        """Every entry, best first."""
        return [self._entries[key] for _, key in self._order]

    def __len__(self) -> int:
        return len(self._order)

    def decision(self, entry: ReviewEntry) -> str | None:
        """The entry's standing decision (None: not reviewed)."""
        taken = self._standing.get(entry.key)
        return taken[-1] if taken else None

    def pending(self) -> int:
        """Entries not reviewed yet."""
        return sum(1 for _, key in self._order if not self._standing.get(key))

    # --- commands ----------------------------------------------------------------------------------------

    def step(self, offset: int = 1) -> ReviewEntry | None:
        """The next (`offset` 1) or previous (-1) entry not yet decided after the current one, wrapping around (an
        image scored later may bring entries above it), made current (from the top when there is none); None, and
        the current one kept, when every entry is decided."""
        found = self.peek(offset)
        if found is not None:
            self.current = found
        return found

    def peek(self, offset: int = 1) -> ReviewEntry | None:
        """The entry `step(offset)` would make current, left as it is (the viewer loads its image ahead)."""
        current, count = self.current, len(self._order)
        if current is None:
            start = -1 if offset > 0 else count
        else:
            here = (current.rank(), current.key)
            start = bisect.bisect_right(self._order, here) - 1 if offset > 0 else bisect.bisect_left(self._order, here)
        for step in range(1, count + 1):
            key = self._order[(start + step * offset) % count][1]
            if not self._standing.get(key):
                return self._entries[key]
        return None

    def go_to(self, entry: ReviewEntry) -> None:
        """Make `entry` (one of the queue's, picked in a list) current, decided or not."""
        if entry.key in self._entries:
            self.current = self._entries[entry.key]

    def decide(self, decision: str, apply: Callable[[ReviewEntry, str], object]) -> ReviewEntry | None:
        """The current entry decided: `apply(entry, decision)` changes the truth (the mask document; what it returns
        is handed to `undo`'s `revert`), the decision is logged, then the next entry not yet decided becomes
        current (returned; None: none is left)."""
        entry = self.current
        if entry is None:
            return None
        done = apply(entry, decision)
        self._record(entry, decision)
        self._history = [*self._history[-(UNDO_DEPTH - 1) :], (entry, done)]
        self.events.changed.emit()
        return self.step(1)

    def undo(self, revert: Callable[[ReviewEntry, str, object], object]) -> ReviewEntry | None:
        """Take back the last decision of this session (of the last `UNDO_DEPTH`): `revert(entry, decision, done)`
        undoes its edit (`done`: what `apply` returned), an undo is logged, and the entry is current again (None:
        nothing to undo)."""
        if not self._history:
            return None
        entry, done = self._history.pop()
        decision = self.decision(entry)
        if decision is not None:
            revert(entry, decision, done)
            self._record(entry, UNDO)
        self.current = entry
        self.events.changed.emit()
        return entry

    def last_decided(self) -> ReviewEntry | None:
        """The entry `undo` would take back (None: none)."""
        return self._history[-1][0] if self._history else None

    def _record(self, entry: ReviewEntry, decision: str) -> None:
        if self.writer is not None:
            self.writer.add(Decision.of(entry, decision, self.who))
            if self.deferred:
                self.events.write_due.emit()
            else:
                self.writer.flush()
        if self._unread is not None:
            self._unread.append((entry.key, decision))
        self._remember(entry.key, decision)

    def _remember(self, key: str, decision: str) -> None:
        taken = self._standing.setdefault(key, [])
        if decision == UNDO:
            if taken:
                taken.pop()
        else:
            taken.append(decision)
