"""The viewer's review queue without Qt: the review log (appends whole lines, survives a torn line, read back in
another session), a decision as one undoable edit of the mask document (expected masks drawn by hand), and the
queue model driven by random sequences of the reviewer's commands (Hypothesis stateful) against a plain
reference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from segscope.core.dataset.dataset import Dataset
from segscope.core.editing.document import MaskDocument
from segscope.core.errors import SegScopeError
from segscope.core.result import InferenceResult, decide
from segscope.core.review.log import LOG_NAME, Decision, ReviewLog
from segscope.core.review.model import ReviewQueueModel
from segscope.core.review.queue import ReviewEntry, result_entries
from segscope.core.roi import Roi


def _entry(image: str, x: int, confidence: float = 0.5, kind: str = "missed") -> ReviewEntry:
    return ReviewEntry(image, 0, kind, 1, (x, 0, x + 4, 4), 16, confidence, ((x, 0),), ())


def test_the_log_appends_whole_lines_and_skips_a_torn_one(tmp_path: Path) -> None:
    log = ReviewLog.beside(tmp_path)
    assert log.path == tmp_path / LOG_NAME and log.read() == []
    first = Decision.of(_entry("a", 3), "accept", who="ana")
    log.append(first)
    with log.path.open("ab") as f:
        f.write(b'{"who": "bo", "when": "2026-12-06T07:00:00+00:00", "ima')  # a write a crash cut short
    second = Decision.of(_entry("b", 9), "keep", who="bo")
    log.append(second)
    lines = log.path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["entry"] == "b/1/missed/9,0,13,4"
    assert json.loads(lines[0]) == {"who": "ana", "when": first.when, "image": "a", "entry": "a/1/missed/3,0,7,4",
                                    "kind": "missed", "class": 1, "bbox": [3, 0, 7, 4], "decision": "accept"}
    assert log.read() == [first, second]


def test_a_decision_is_one_undoable_edit_of_the_document(tmp_path: Path, write_png) -> None:
    """A 0/255 truth with a spurious blob, a prediction with a defect the truth lacks; the ROI (40 x 30 at (5, 5)
    of a 60 x 40 slide) is twice the model's output (each model pixel one 2 x 2 block of the ROI)."""
    truth = np.zeros((40, 60), np.uint8)
    truth[25:29, 30:34] = 255  # spurious: nothing predicted there
    truth[30:32, 50:52] = 255  # outside the ROI's entries: untouched
    write_png(tmp_path / "d" / "a" / "image.png", np.zeros((40, 60, 3), np.uint8))
    write_png(tmp_path / "d" / "a" / "mask.png", truth)
    dataset = Dataset.open(tmp_path / "d")
    document = MaskDocument(dataset, dataset.items[0], (60, 40), truth.copy())
    model = np.zeros((15, 20), np.uint8)
    model[2:3, 2:4] = 1  # ROI x 4..8, y 4..6: slide x 9..13, y 9..11
    p1 = np.where(model == 1, 0.9, 0.1).astype(np.float32)
    probabilities = np.stack([1 - p1, p1], axis=-1)
    result = InferenceResult(probabilities, decide(probabilities, None), Roi(5, 5, 45, 35), (60, 40))
    labels = (truth[5:35, 5:45] > 0).astype(np.uint8)
    entries = {e.kind: e for e in result_entries("a", 0, result, labels)}
    assert set(entries) == {"missed", "false_alarm"}
    changes = []
    document.events.changed.connect(changes.append)
    accepted = document.review_decision(result, entries["false_alarm"], "accept")
    assert accepted is not None and accepted[0] == Roi(9, 9, 13, 11) and not accepted[1].any()
    assert document.review_decision(result, entries["missed"], "keep") is None
    removed = document.review_decision(result, entries["missed"], "remove")
    assert removed is not None and removed[0] == Roi(30, 25, 34, 29) and (removed[1] == 255).all()
    expected = truth.copy()
    expected[9:11, 9:13] = 255
    expected[25:29, 30:34] = 0
    assert np.array_equal(document.mask, expected) and document.dirty and changes == ["edit", "edit"]
    document.undo()
    expected[25:29, 30:34] = 255
    assert np.array_equal(document.mask, expected)
    document.undo()
    assert np.array_equal(document.mask, truth)
    document.redo()
    document.put_back(result, *accepted)  # the pixels as before the decision, as one more edit
    assert np.array_equal(document.mask, truth)


class QueueMachine(RuleBasedStateMachine):
    """The model against a reference: the entries of each image as last set, every decision in order."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(self._tmp())
        self.model = ReviewQueueModel(ReviewLog.beside(self.folder), who="test")
        self.images: dict[str, list[ReviewEntry]] = {}
        self.standing: dict[str, list[str]] = {}
        self.applied: list[tuple[str, str]] = []
        self.reverted: list[tuple[str, str]] = []
        self.undoable: list[tuple[ReviewEntry, int]] = []  # the decisions undo may take back, with what `apply` gave

    @staticmethod
    def _tmp() -> str:
        import tempfile

        return tempfile.mkdtemp(prefix="review-model-")

    @rule(image=st.sampled_from("abc"), xs=st.lists(st.integers(0, 6), max_size=4, unique=True),
          confidence=st.sampled_from([0.2, 0.5, 0.9]))
    def set_image(self, image: str, xs: list[int], confidence: float) -> None:
        entries = [_entry(image, x, confidence) for x in xs]
        self.model.set_image(image, entries)
        self.images[image] = entries

    @rule(offset=st.sampled_from([1, -1]))
    def step(self, offset: int) -> None:
        before = self.model.current
        found = self.model.step(offset)
        reference = self._ordered()
        if before is None:
            candidates = reference if offset > 0 else reference[::-1]
        else:  # after the current one, then from the other end (wrapping), the current one last
            key = (before.rank(), before.key)
            later = [e for e in reference if (e.rank(), e.key) > key]
            earlier = [e for e in reference if (e.rank(), e.key) < key]
            itself = [e for e in reference if (e.rank(), e.key) == key]
            candidates = (later + earlier if offset > 0 else earlier[::-1] + later[::-1]) + itself
        pending = [e for e in candidates if not self.standing.get(e.key)]
        assert found == (pending[0] if pending else None)
        assert self.model.current == (found if found is not None else before)

    @precondition(lambda self: self.model.current is not None)
    @rule(decision=st.sampled_from(["accept", "remove", "keep"]))
    def decide(self, decision: str) -> None:
        entry = self.model.current
        assert entry is not None
        self.model.decide(decision, lambda e, d: self.applied.append((e.key, d)) or len(self.applied))
        assert self.applied[-1] == (entry.key, decision)
        self.standing.setdefault(entry.key, []).append(decision)
        self.undoable.append((entry, len(self.applied)))

    @rule()
    def undo(self) -> None:
        entry = self.model.undo(lambda e, d, done: self.reverted.append((e.key, d, done)))
        if not self.undoable:
            assert entry is None
            return
        expected, done = self.undoable.pop()
        assert entry == expected and self.model.current == expected
        assert self.reverted[-1] == (expected.key, self.standing[expected.key].pop(), done)

    @rule()
    def reopen(self) -> None:
        """Another session on the same dataset: the decisions come back from the log."""
        entries = {image: list(entries) for image, entries in self.images.items()}
        self.model = ReviewQueueModel(ReviewLog.beside(self.folder), who="test")
        for image, listed in entries.items():
            self.model.set_image(image, listed)
        self.undoable.clear()

    def _ordered(self) -> list[ReviewEntry]:
        unique: dict[str, ReviewEntry] = {}
        for entries in self.images.values():
            for entry in entries:
                unique.setdefault(entry.key, entry)
        return sorted(unique.values(), key=lambda e: (e.rank(), e.key))

    @invariant()
    def same_order_and_decisions(self) -> None:
        ordered = self._ordered()
        assert self.model.entries() == ordered
        for entry in ordered:
            taken = self.standing.get(entry.key)
            assert self.model.decision(entry) == (taken[-1] if taken else None)
        assert self.model.pending() == sum(1 for e in ordered if not self.standing.get(e.key))


TestQueueModel = QueueMachine.TestCase
TestQueueModel.settings = settings(max_examples=40, stateful_step_count=25, deadline=None,
                                   suppress_health_check=[HealthCheck.too_slow])


class DeferredLogMachine(RuleBasedStateMachine):
    """The viewer's log: read by a worker some time after the dataset opens and written by a worker's flushes, the
    reviewer deciding meanwhile. Reference: every decision (and undo) in the order taken, across sessions; the log
    always holds a prefix of it, the rest waiting, and once read the model's standing decisions are the
    reference's."""

    ENTRIES = [_entry("a", x, 0.5) for x in range(5)]

    def __init__(self) -> None:
        super().__init__()
        self.log = ReviewLog.beside(Path(QueueMachine._tmp()))
        self.made: list[tuple[str, str]] = []  # (entry key, decision or undo), in order
        self.history: list[str] = []  # this session's undoable decisions' keys
        self._open()

    def _open(self) -> None:
        self.model = ReviewQueueModel(deferred=True)
        self.model.set_log(self.log, read=False)
        self.read = self.log.read()  # the worker's read: on the lane before any write of this session
        self.model.set_image("a", self.ENTRIES)
        self.history = []

    @rule(index=st.integers(0, 4), decision=st.sampled_from(["accept", "remove", "keep"]))
    def decide(self, index: int, decision: str) -> None:
        self.model.go_to(self.ENTRIES[index])
        self.model.decide(decision, lambda e, d: None)
        self.made.append((self.ENTRIES[index].key, decision))
        self.history.append(self.ENTRIES[index].key)

    @rule()
    def undo(self) -> None:
        entry = self.model.undo(lambda e, d, done: None)
        if not self.history:
            assert entry is None
            return
        key = self.history.pop()
        assert entry is not None and entry.key == key
        if self._standing().get(key):
            self.made.append((key, "undo"))

    @rule()
    def flush(self) -> None:
        assert self.model.writer is not None
        self.model.writer.flush()

    @rule()
    def adopt(self) -> None:
        self.model.adopt_log(self.log, self.read)

    @rule()
    def reopen(self) -> None:
        assert self.model.writer is not None
        self.model.writer.flush()  # (the lane writes what waits before the next open's read)
        self._open()

    def _standing(self) -> dict[str, list[str]]:
        standing: dict[str, list[str]] = {}
        for key, decision in self.made:
            taken = standing.setdefault(key, [])
            if decision == "undo":
                if taken:
                    taken.pop()
            else:
                taken.append(decision)
        return standing

    @invariant()
    def the_log_is_a_prefix_and_the_model_knows_once_read(self) -> None:
        assert self.model.writer is not None
        written = [(d.entry, d.decision) for d in self.log.read()]
        assert written == self.made[: len(written)] and len(written) + self.model.writer.waiting == len(self.made)
        if not self.model.reading:  # read and adopted
            standing = self._standing()
            for entry in self.ENTRIES:
                taken = standing.get(entry.key)
                assert self.model.decision(entry) == (taken[-1] if taken else None)


TestDeferredLog = DeferredLogMachine.TestCase
TestDeferredLog.settings = settings(max_examples=30, stateful_step_count=25, deadline=None,
                                    suppress_health_check=[HealthCheck.too_slow])


def test_a_failed_flush_keeps_its_batch_ahead_of_later_decisions(tmp_path: Path) -> None:
    from segscope.core.review.log import LogWriter

    folder = tmp_path / "gone"
    folder.mkdir()
    writer = LogWriter(ReviewLog.beside(folder))
    writer.add(Decision.of(_entry("a", 0), "keep", who="ana"))
    folder.rmdir()  # the dataset folder went away: the append fails
    with pytest.raises(SegScopeError, match="cannot add to the review log"):
        writer.flush()
    writer.add(Decision.of(_entry("a", 5), "accept", who="ana"))
    assert writer.waiting == 2
    folder.mkdir()
    assert writer.flush() == 2
    assert [d.entry for d in ReviewLog.beside(folder).read()] == ["a/1/missed/0,0,4,4", "a/1/missed/5,0,9,4"]


def test_decide_steps_over_decided_entries_to_the_next_image() -> None:
    model = ReviewQueueModel()
    model.set_image("a", [_entry("a", 0, 0.9), _entry("a", 5, 0.2)])
    model.set_image("b", [_entry("b", 0, 0.5)])
    seen = []
    model.events.current.connect(lambda new, old: seen.append(new.key if new else None))
    assert model.step() == _entry("a", 0, 0.9)
    assert model.decide("keep", lambda e, d: None) == _entry("b", 0, 0.5)  # 0.5 before 0.2
    assert model.decide("accept", lambda e, d: None) == _entry("a", 5, 0.2)
    assert model.decide("remove", lambda e, d: None) is None and model.pending() == 0
    assert seen == ["a/1/missed/0,0,4,4", "b/1/missed/0,0,4,4", "a/1/missed/5,0,9,4"]
    with pytest.raises(ValueError):
        from segscope.core.review.decisions import apply_decision

        apply_decision(np.zeros((4, 4), np.uint8), np.zeros((4, 4), np.uint8), Roi(0, 0, 4, 4), _entry("a", 0),
                       "maybe")


# ----------------------------------------------------------------------------------- the session's queue
SW, SH = 20, 12


def _session_dataset(tmp_path: Path, write_png) -> Dataset:
    """Two 20 x 12 slides: a truth with a found defect (x 2..6) and a spurious blob (x 9..12); the prediction
    (`_session_result`) has the defect and one the truth lacks (x 14..18)."""
    truth = np.zeros((SH, SW), np.uint8)
    truth[2:6, 2:6] = 255
    truth[2:5, 9:12] = 255
    for name in ("a", "b"):
        write_png(tmp_path / "d" / name / "image.png", np.full((SH, SW, 3), 128, np.uint8))
        write_png(tmp_path / "d" / name / "mask.png", truth)
    return Dataset.open(tmp_path / "d")


def _session_result() -> InferenceResult:
    p1 = np.full((SH, SW), 0.1, np.float32)
    p1[2:6, 2:6] = 0.9
    p1[6:10, 14:18] = 0.8
    probabilities = np.stack([1 - p1, p1], axis=-1)
    return InferenceResult(probabilities, decide(probabilities, None), Roi(0, 0, SW, SH), (SW, SH))


def _fill_queue(session) -> None:
    review = session.review
    for item_id in review.due():
        job = review.job(item_id)
        assert review.adopt(job, job.run())


def test_the_session_queue_decides_through_the_document_and_the_log(tmp_path: Path, write_png) -> None:
    from segscope.core.evaluate import ImageEvaluation
    from segscope.core.metrics.scores import image_metrics
    from segscope.core.session.jobs import run_here
    from segscope.core.session.session import Session

    session = Session(persist=False)
    run_here(session.open_dataset(_session_dataset(tmp_path, write_png)))
    run_here(session.select("a"))
    for item_id in ("a", "b"):
        item = session.dataset.item(item_id)
        result = _session_result()
        session.add_evaluation(ImageEvaluation(item, result, image_metrics(result, session.dataset.load_mask(item))),
                               session.truth_versions()(item_id))
    _fill_queue(session)
    queue = session.review.queue
    # Per image: the blob the truth has alone (9 px, margin 0.8) and the defect it lacks (16 px, margin 0.6).
    assert [(e.image, e.kind, e.bbox, e.area) for e in queue.entries()] == [
        ("a", "false_alarm", (14, 6, 18, 10), 16), ("b", "false_alarm", (14, 6, 18, 10), 16),
        ("a", "missed", (9, 2, 12, 5), 9), ("b", "missed", (9, 2, 12, 5), 9)]
    assert queue.entries()[0].score == pytest.approx(0.6 * 16 / 48) and queue.entries()[2].score == \
        pytest.approx(0.8 * 9 / 41)
    queue.step()
    accepted = queue.current
    assert session.review.decide("accept") == Roi(14, 6, 18, 10)
    assert queue.current == queue.entries()[1]  # on to b's: the reviewer's next key loads b
    expected = np.zeros((SH, SW), np.uint8)
    expected[2:6, 2:6] = expected[2:5, 9:12] = expected[6:10, 14:18] = 255
    assert np.array_equal(session.document.mask, expected)
    with pytest.raises(SegScopeError, match="show the image first"):
        session.review.decide("keep")  # b is not on screen
    session.document.save("corrected")  # (a save between a decision and its undo: the pixels go back all the same)
    assert session.review.undo() == Roi(14, 6, 18, 10)
    assert np.array_equal(session.document.mask[6:10, 14:18], np.zeros((4, 4), np.uint8))
    assert queue.current == queue.entries()[0]
    session.review.decide("accept")
    session.metrics("a")  # the edit made a's numbers stale: re-scored, then its entries
    _fill_queue(session)
    assert [(e.image, e.kind) for e in queue.entries()] == [("b", "false_alarm"), ("a", "missed"), ("b", "missed")]
    records = [json.loads(line) for line in (tmp_path / "d" / LOG_NAME).read_text().splitlines()]
    assert [(r["image"], r["decision"]) for r in records] == [("a", "accept"), ("a", "undo"), ("a", "accept")]
    reopened = Session(persist=False)  # another session: a's decision stands, from the log
    run_here(reopened.open_dataset(Dataset.open(tmp_path / "d")))
    assert reopened.review.queue.decision(accepted) == "accept"
    assert reopened.review.queue.decision(queue.entries()[0]) is None
