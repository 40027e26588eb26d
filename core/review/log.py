"""The review log beside a dataset: one JSON line per decision (who, when, image, entry, kind, class, box,
decision), kept across sessions, so a reopened dataset knows which entries were reviewed.

Appending is safe for several writers and crashes: each batch of records is one `write` of whole lines to a file
opened with O_APPEND (the system appends each write whole at the end; records of two viewers never interleave), then
fsync'd. The viewer writes off its GUI thread: a `LogWriter` keeps the decisions in order until a worker `flush`es
them (one flush at a time; a batch that fails stays for the next). A line a crash cut short is skipped when read
(said once), and the next record starts on a line of its own. An `undo` record takes back the entry's previous
decision (`core.review.model` reads the standing ones)."""

from __future__ import annotations

import datetime
import getpass
import json
import logging
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import SegScopeError
from ..files.fileio import read_text
from .queue import ReviewEntry

#: The log's name in the dataset's folder.
LOG_NAME = "segscope-review.jsonl"
UNDO = "undo"
LOG = logging.getLogger("segscope.review")


@dataclass(frozen=True)
class Decision:
    who: str
    when: str  # UTC, ISO 8601
    image: str
    entry: str  # the entry's key (`ReviewEntry.key`)
    kind: str
    cls: int
    bbox: tuple[int, int, int, int]
    decision: str  # accept, remove, keep, or undo

    @classmethod
    def of(cls, entry: ReviewEntry, decision: str, who: str | None = None) -> Decision:
        """A decision on `entry` now, by `who` (default: the login name)."""
        when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        return cls(who if who is not None else _user(), when, entry.image, entry.key, entry.kind, entry.cls,
                   entry.bbox, decision)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return "unknown"


def _line(decision: Decision) -> bytes:
    record = asdict(decision)
    record["class"], record["bbox"] = record.pop("cls"), list(decision.bbox)
    return (json.dumps(record, ensure_ascii=False) + "\n").encode()


class ReviewLog:
    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def beside(cls, dataset_root: Path) -> ReviewLog:
        return cls(dataset_root / LOG_NAME)

    def append(self, decision: Decision) -> None:
        """Add one record at the end, whole (one write), on disk when this returns."""
        self.append_all([decision])

    def append_all(self, decisions: list[Decision]) -> None:
        """Add records at the end, in order, whole (one write), on disk when this returns."""
        if not decisions:
            return
        line = b"".join(_line(decision) for decision in decisions)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":  # a line a crash cut short: start a new one
                    line = b"\n" + line
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise SegScopeError(f"{self.path}: cannot add to the review log ({exc.strerror}); check the dataset "
                                "folder is writable") from exc

    def read(self) -> list[Decision]:
        """Every whole record in order (none when there is no log); lines that are not a record are skipped and
        said once."""
        if not self.path.exists():
            return []
        decisions, bad = [], 0
        for line in read_text(self.path, "review log").splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                decisions.append(Decision(str(record["who"]), str(record["when"]), str(record["image"]),
                                          str(record["entry"]), str(record["kind"]), int(record["class"]),
                                          tuple(int(v) for v in record["bbox"]),  # type: ignore[arg-type]
                                          str(record["decision"])))
            except (ValueError, KeyError, TypeError):
                bad += 1
        if bad:
            LOG.warning("%s: %d line(s) are not review records (a write cut short?): skipped", self.path, bad)
        return decisions


class LogWriter:
    """Decisions on their way into `log`, in the order added; `flush` (any thread, one at a time) writes those
    waiting in one append. A flush that fails puts its batch back ahead of any added meanwhile and raises."""

    def __init__(self, log: ReviewLog):
        self.log = log
        self._waiting: list[Decision] = []
        self._lock = threading.Lock()  # guards _waiting
        self._flushing = threading.Lock()  # one flush at a time: batches land in order

    def add(self, decision: Decision) -> None:
        with self._lock:
            self._waiting.append(decision)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)

    def flush(self) -> int:
        """Write what waits; how many records were written."""
        with self._flushing:
            with self._lock:
                batch, self._waiting = self._waiting, []
            try:
                self.log.append_all(batch)
            except BaseException:
                with self._lock:
                    self._waiting[:0] = batch
                raise
            return len(batch)
