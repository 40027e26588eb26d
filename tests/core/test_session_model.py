"""A model-based test of the Qt-free session (issue 30's done-when test): Hypothesis drives it through random
sequences of the user's commands (select, ROI moves and their undo, run, run all, run whole slide, edits and
their undo, save, discard, auto-save, a crash with the restart that restores or declines the recovered edits,
reopening, another model) and after every step checks every number any view would show of every image (its
row; the headline, the Metrics dock, the Review and Defects docks of the image on screen) against a NumPy
scoring, written here, of the result that answers for the image against the truth this test expects for it.

The backend is a fake in-process one whose probabilities are a fixed function of each pixel's grey level, at
the ROI's own resolution (and at scale 1 in whole-slide tiles), so a reference needs no resampling.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from scipy import ndimage

from segscope.core.backends.base import Backend, Capabilities
from segscope.core.dataset.dataset import Dataset
from segscope.core.dataset.truth import corrected_mask_path
from segscope.core.editing.document import mask_source
from segscope.core.editing.files import save_mask, write_recovery
from segscope.core.export.job import ExportChoices
from segscope.core.metrics.review import ERROR_NAMES, error_codes
from segscope.core.metrics.scores import argmax_at_roi
from segscope.core.quality.spec import MetricSpec
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.session.answers import RUN, WHOLE_SLIDE
from segscope.core.session.backend_state import BackendState
from segscope.core.session.events import SaveConflict
from segscope.core.session.jobs import run_backend_job, run_here
from segscope.core.session.session import Session
from segscope.core.session.views import UNSAVED_MARK, headline, item_view, review_input
from segscope.core.slides import open_slide
from segscope.core.wholeslide.evaluate import TilePlan

from helpers import same_numbers, without_medians

W, H = 96, 72
TILE = 32
IDS = ("a", "b", "c")  # "c" has no mask until one is painted and saved
DEFAULT_ROI = Roi(8, 8, 72, 56)
FOREGROUND = 255


# --------------------------------------------------------------------------------------- the test's data
def _boxes(seed: int) -> tuple[list[Roi], list[Roi]]:
    """Bright boxes (what the fake model finds) and true defect boxes (overlapping some, missing one)."""
    rng = np.random.default_rng(seed)
    bright, true = [], []
    for _ in range(4):
        x, y = int(rng.integers(0, W - 20)), int(rng.integers(0, H - 16))
        w, h = int(rng.integers(6, 20)), int(rng.integers(5, 16))
        bright.append(Roi(x, y, x + w, y + h))
        dx, dy = int(rng.integers(-3, 4)), int(rng.integers(-3, 4))
        true.append(Roi(max(x + dx, 0), max(y + dy, 0), min(x + dx + w, W), min(y + dy + h, H)))
    x, y = int(rng.integers(0, W - 8)), int(rng.integers(0, H - 8))
    true.append(Roi(x, y, x + 6, y + 5))  # a defect nothing bright shows
    return bright, true


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_template(tmp_path_factory.mktemp("model") / "dataset")


def write_template(root: Path) -> Path:
    """Three 96 x 72 slides: "a" and "b" with masks, "c" without; the default ROI fits them."""
    for index, item_id in enumerate(IDS):
        bright, true = _boxes(index)
        rng = np.random.default_rng(100 + index)
        grey = rng.integers(30, 90, (H, W), dtype=np.uint8)  # below the fake model's cut
        for box in bright:
            grey[box.y0 : box.y1, box.x0 : box.x1] = rng.integers(170, 250, (box.height, box.width))
        (root / item_id).mkdir(parents=True)
        assert cv2.imwrite(str(root / item_id / "image.png"), np.dstack([grey] * 3))
        if item_id != "c":
            mask = np.zeros((H, W), np.uint8)
            for box in true:
                mask[box.y0 : box.y1, box.x0 : box.x1] = FOREGROUND
            assert cv2.imwrite(str(root / item_id / "mask.png"), mask)
    sidecar = {"version": 1, "default_roi": list(DEFAULT_ROI.as_tuple()), "rois": {}}
    (root / "segscope.json").write_text(json.dumps(sidecar), encoding="utf-8")
    return root


class FakeBackend(Backend):
    """Probabilities from each pixel's grey level alone (so tiles and ROI runs agree), at the input's resolution:
    class 1 where the grey level is above `cut`, never exactly 0.5."""

    def __init__(self, model: str, cut: int, truth_values: str = "") -> None:
        details = {"model": model, **({"truth_values": truth_values} if truth_values else {})}
        self.capabilities = Capabilities("fake", "test", (TILE, TILE), ("background", "defect"), details)
        self.cut = cut
        self._images: dict[Path, np.ndarray] = {}

    def infer(self, image, roi=None) -> InferenceResult:  # type: ignore[no-untyped-def]
        if isinstance(image, Path):
            pixels = self._images.setdefault(image, cv2.imread(str(image), cv2.IMREAD_COLOR))
        else:
            pixels = image
        size = (pixels.shape[1], pixels.shape[0])
        roi = roi or Roi.whole(*size)
        grey = pixels[roi.y0 : roi.y1, roi.x0 : roi.x1, 0].astype(np.float32)
        p1 = np.where(grey > self.cut, 0.75, 0.2) + (grey % 7) * 0.005
        probabilities = np.stack([1 - p1, p1], axis=-1).astype(np.float32)
        return InferenceResult(probabilities, (p1 > 0.5).astype(np.uint8), roi, size, backend="fake")

    def close(self) -> None:
        self._images.clear()


# ------------------------------------------------------------------------------------------ the reference
@dataclass(frozen=True)
class Reference:
    soft_dice: float
    dice: float  # foreground (class 1) hard Dice; NaN: neither mask has foreground
    iou: float
    precision: float
    recall: float
    counts: dict[str, int]  # TP/FP/FN/TN pixels (the Error regions dock)
    defects: tuple[int, int, int]  # TP, FP, FN defects (the Defects dock)


def _components(mask: np.ndarray) -> list[np.ndarray]:
    labels, count = ndimage.label(mask, structure=np.ones((3, 3)))
    return [labels == i for i in range(1, count + 1)]


def _defects(pred: np.ndarray, truth: np.ndarray) -> tuple[int, int, int]:
    """(TP, FP, FN) defects: 8-connected components matched one to one at IoU >= 0.5, the best pairs first. An
    unmatched prediction is no false alarm when it is one of several pieces of one true defect: it lies at least
    half inside that defect (the one holding most of it), which another prediction matches or also lies at least
    half inside, and it is not a merge's host (a prediction holding at least half of each of two true defects)."""
    ps, ts = _components(pred), _components(truth)
    pairs = sorted((-np.sum(p & t) / np.sum(p | t), i, j) for i, p in enumerate(ps) for j, t in enumerate(ts))
    matched: dict[int, int] = {}  # prediction -> true defect
    for negative_iou, i, j in pairs:
        if -negative_iou >= 0.5 and i not in matched and j not in matched.values():
            matched[i] = j
    holder = {j: max(range(len(ps)), key=lambda i: (np.sum(ps[i] & t), -i)) for j, t in enumerate(ts) if ps}
    mostly_held = [i for j, i in holder.items() if np.sum(ps[i] & ts[j]) >= 0.5 * np.sum(ts[j])]
    hosts = {i for i in mostly_held if mostly_held.count(i) >= 2}
    piece_of = dict(matched)
    for i, p in enumerate(ps):
        if i not in matched and i not in hosts and ts:
            home = max(range(len(ts)), key=lambda j: (np.sum(p & ts[j]), -j))
            if np.sum(p & ts[home]) >= 0.5 * np.sum(p):
                piece_of[i] = home
    pieces = [j for j in piece_of.values()]
    split = {i for i, j in piece_of.items() if i not in matched and pieces.count(j) >= 2}
    return len(matched), len(ps) - len(matched) - len(split), len(ts) - len(matched)


def reference(result: InferenceResult, mask: np.ndarray) -> Reference:
    """The numbers of `result` against the full-slide 0/255 `mask`, at the ROI's resolution."""
    roi = result.roi
    p = result.probabilities.astype(np.float64)
    assert p.shape == (roi.height, roi.width, 2)  # the fake answers at the ROI's own resolution
    truth = mask[roi.y0 : roi.y1, roi.x0 : roi.x1] > 127
    pred = p[..., 1] > p[..., 0]
    tp, fp, fn = int(np.sum(pred & truth)), int(np.sum(pred & ~truth)), int(np.sum(~pred & truth))
    tn = truth.size - tp - fp - fn
    soft = 2 * np.sum(np.where(truth, p[..., 1], p[..., 0])) / (np.sum(p * p) + truth.size + 1e-6)
    # precision and recall are n/a where their denominator is 0 (Metrics Reloaded: nothing predicted, nothing to find)
    return Reference(float(soft), 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else math.nan,
                     tp / (tp + fp + fn) if tp + fp + fn else math.nan, tp / (tp + fp) if tp + fp else math.nan,
                     tp / (tp + fn) if tp + fn else math.nan, {"TP": tp, "FP": fp, "FN": fn, "TN": tn},
                     _defects(pred, truth))


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) < 1e-7  # (float32 sums in the product)


# --------------------------------------------------------------------------------------------- the machine
class SessionMachine(RuleBasedStateMachine):
    """The session, and what this test expects of it: each image's truth (the mask it must be scored against),
    its runs, whether its mask has unsaved edits, and what a crash would leave."""

    root: Path

    def __init__(self) -> None:
        super().__init__()
        self._folder = tempfile.TemporaryDirectory(prefix="segscope-model-")
        self.root = Path(self._folder.name) / "dataset"
        shutil.copytree(TEMPLATE[0], self.root)
        # C's card names its mask values (the same classes): masks are read by another rule once it opens
        self.backends = {"A": FakeBackend("model-a", 128), "B": FakeBackend("model-b", 100),
                         "C": FakeBackend("model-c", 128, f"0:0,{FOREGROUND}:1")}
        self.model = "A"
        self.truth: dict[str, np.ndarray | None] = {}  # what each image must be scored against
        self.on_disk: dict[str, np.ndarray | None] = {}  # its mask file
        self.recovery: dict[str, np.ndarray] = {}  # what its recovery file holds (a crash brings it back)
        self.unsaved: set[str] = set()  # images whose recovered edits are not on screen yet
        self.runs: dict[str, tuple[Roi, str]] = {}  # its newest ROI run: ROI, model
        self.slides: set[str] = set()  # images with a whole-slide run
        self.newer_slides: set[str] = set()  # of those, images whose whole-slide run is newer than their ROI run
        self.session = self._new_session()

    def teardown(self) -> None:
        self.session.flush()
        self._folder.cleanup()

    def _new_session(self) -> Session:
        state = BackendState("fake")
        state.opened(self.backends[self.model].capabilities)
        session = Session(backend=state)
        session.set_quality_spec(MetricSpec.parse("defect_f1"))
        return session

    @initialize()
    def open(self) -> None:
        dataset = Dataset.open(self.root)
        for item in dataset.items:
            mask = dataset.load_mask(item)
            self.truth[item.id] = self.on_disk[item.id] = mask
        run_here(self.session.open_dataset(dataset))
        self._truths_by_model()  # (the viewer's, once a dataset and a model are open)
        self._select("a")

    # ------------------------------------------------------------------------------------------ helpers
    def _truths_by_model(self) -> bool:
        """The viewer's command once a dataset and a model are open: the masks read by the model's rule, every one
        checked (a job); True when the rule changed."""
        check = self.session.truths_by_model()
        if check is not None:
            run_here(check)
        return check is not None

    def _select(self, item_id: str) -> None:
        run_here(self.session.select(item_id))
        self.unsaved.discard(item_id)  # recovered edits are the document's edits now

    @property
    def current(self) -> str | None:
        return self.session.current.id if self.session.current is not None else None

    @property
    def dirty(self) -> bool:
        document = self.session.document
        return document is not None and document.dirty

    def _backend(self) -> FakeBackend:
        return self.backends[self.model]

    def _leave(self, save: bool) -> None:
        """What the viewer asks before the image goes: Save or Discard its unsaved edits."""
        if self.dirty:
            self.save("corrected") if save else self.discard()

    def settle_scores(self) -> None:
        for item_id in self.session.due():
            job = self.session.score_job(item_id)
            assert job is not None
            assert self.session.adopt_score(job, job.run())

    # -------------------------------------------------------------------------------------------- rules
    @rule(item_id=st.sampled_from(IDS), save=st.booleans())
    def select(self, item_id: str, save: bool) -> None:
        self._leave(save)
        self._select(item_id)

    @rule(x=st.integers(0, W - 24), y=st.integers(0, H - 24), w=st.integers(16, 64), h=st.integers(16, 48))
    def move_roi(self, x: int, y: int, w: int, h: int) -> None:
        self.session.set_roi(Roi(x, y, min(x + w, W), min(y + h, H)))

    @precondition(lambda self: self.session.roi_moves.can_undo or self.session.roi_moves.can_redo)
    @rule(undo=st.booleans())
    def undo_roi(self, undo: bool) -> None:
        self.session.undo_roi() if undo else self.session.redo_roi()

    def _use(self, model: str) -> None:
        """Open another model (the results of the one before no longer answer), and read the masks by its rule
        as the viewer does (the image on screen read again unless its edits are unsaved)."""
        if model != self.model:
            self.model = model
            self.session.backend.opened(self._backend().capabilities)
            if self._truths_by_model() and not self.dirty:
                self._select(self.current)

    def _run(self, item_ids: list[str]) -> None:
        planned = {i: self.session.roi_for(i) for i in item_ids}
        run_backend_job(self.session.run(item_ids), self._backend())
        for item_id in item_ids:
            self.runs[item_id] = (planned[item_id], self._backend().capabilities.details["model"])
            self.newer_slides.discard(item_id)

    @rule(model=st.sampled_from(["A", "A", "B", "C"]))
    def run_current(self, model: str) -> None:
        self._use(model)
        self._run([self.current])

    @rule(model=st.sampled_from(["A", "A", "B", "C"]))
    def run_all(self, model: str) -> None:
        self._use(model)
        self._run(list(IDS))

    @rule(model=st.sampled_from(["A", "A", "B", "C"]))
    def run_whole_slide(self, model: str) -> None:
        self._use(model)
        item = self.session.current
        with open_slide(item.image_path) as reader:
            plan = TilePlan((TILE, TILE), overlap=8)
            run_backend_job(self.session.run_whole_slide(reader, plan, 12), self._backend())
        self.slides.add(item.id)
        self.newer_slides.add(item.id)

    @rule(x=st.integers(0, W - 4), y=st.integers(0, H - 4), w=st.integers(2, 30), h=st.integers(2, 30),
          paint=st.booleans(), autosaved=st.booleans())
    def edit(self, x: int, y: int, w: int, h: int, paint: bool, autosaved: bool) -> None:
        """A brush stroke (paint or erase a box), and the auto-save the viewer's timer makes seconds later."""
        document = self.session.document
        box = Roi(x, y, min(x + w, W), min(y + h, H))
        editor = document.ensure_editor(2)
        editor.replace(np.full((box.height, box.width), FOREGROUND if paint else 0, np.uint8), box)
        document.edited()
        self._follow(document)
        if autosaved and self.dirty:
            self.autosave()

    def _follow(self, document) -> None:  # type: ignore[no-untyped-def]
        """The truth of the image on screen: its edited mask while it has unsaved edits, else its file (edits
        undone back to it leave nothing to recover)."""
        self.truth[self.current] = document.mask.copy() if document.dirty else self.on_disk[self.current]
        if not document.dirty:
            self.recovery.pop(self.current, None)

    @precondition(lambda self: self.session.document is not None and self.session.document.editor is not None)
    @rule(undo=st.booleans())
    def undo_edit(self, undo: bool) -> None:
        document = self.session.document
        document.undo() if undo else document.redo()
        self._follow(document)

    @precondition(lambda self: self.dirty)
    @rule(mode=st.sampled_from(["corrected", "replace"]))
    def save(self, mode: str) -> None:
        document = self.session.document
        run_here(self.session.save_job(mode))  # type: ignore[arg-type]
        self.on_disk[self.current] = self.truth[self.current] = document.mask.copy()
        self.recovery.pop(self.current, None)

    @precondition(lambda self: self.dirty)
    @rule(choice=st.sampled_from(["copy", "theirs", "overwrite"]), x=st.integers(0, W - 8))
    def another_viewer_saves_first(self, choice: str, x: int) -> None:
        """Another viewer saves this image's mask (a correction) after this one read it: this viewer's save writes
        nothing and asks (issue 40); keep mine as a copy, take theirs or overwrite each keeps what it says."""
        document = self.session.document
        source = mask_source(document.item)
        theirs = np.zeros((H, W), np.uint8)
        theirs[4:12, x : x + 8] = FOREGROUND
        save_mask(theirs, source, "corrected")  # (the other viewer: no stamps of this one's)
        conflicts: list[SaveConflict] = []

        def asked(conflict: SaveConflict) -> None:
            conflicts.append(conflict)

        self.session.events.save_conflict.connect(asked)
        try:
            run_here(self.session.save_job("corrected"))
        finally:
            self.session.events.save_conflict.disconnect(asked)
        assert [c.path for c in conflicts] == [corrected_mask_path(source)] and self.dirty
        assert np.array_equal(cv2.imread(str(corrected_mask_path(source)), cv2.IMREAD_UNCHANGED), theirs)
        mine = document.mask.copy()
        copies = set(source.parent.glob(f"{source.stem}.mine-*.png"))
        run_here(self.session.resolve_conflict(conflicts[0], choice))
        kept = self.on_disk[self.current] = self.truth[self.current] = mine if choice == "overwrite" else theirs
        assert not self.dirty and np.array_equal(document.mask, kept)
        (new_copy,) = set(source.parent.glob(f"{source.stem}.mine-*.png")) - copies if choice == "copy" else (None,)
        if new_copy is not None:
            assert np.array_equal(cv2.imread(str(new_copy), cv2.IMREAD_UNCHANGED), mine)
        self.recovery.pop(self.current, None)

    @precondition(lambda self: self.dirty)
    @rule()
    def discard(self) -> None:
        self.session.discard()
        self.truth[self.current] = self.on_disk[self.current]
        self.recovery.pop(self.current, None)

    def autosave(self) -> None:
        """What the viewer's auto-save timer writes while there are unsaved edits."""
        document = self.session.document
        write_recovery(document.editor.snapshot(), mask_source(document.item), self.session.recovery_dir)
        self.recovery[self.current] = document.mask.copy()

    @rule(restore=st.booleans(), model_first=st.booleans())
    def crash_and_restart(self, restore: bool, model_first: bool) -> None:
        """A kill once the store wrote the runs: whatever was not saved is lost but for the auto-saved edits. A
        new session opens the folder, restores its runs and the recovered edits, announced at once (or the user
        declines them), and shows image "a". The model's mask rule is read as the viewer reads it once both are
        open: before the restore (`model_first`) or after it (the model finished loading later)."""
        self.session.flush()
        self.session = self._new_session()
        announced = []
        self.session.events.edits_recovered.connect(lambda recovered: announced.extend(recovered.item_ids))
        restore_job = self.session.open_dataset(Dataset.open(self.root))
        if model_first:
            self._truths_by_model()
        run_here(restore_job)
        if not model_first:
            self._truths_by_model()
        assert sorted(announced) == sorted(self.recovery)
        self.unsaved = set(self.recovery)
        if not restore:
            self.session.discard_recovered(sorted(self.recovery))
            self.recovery.clear()
            self.unsaved.clear()
        self.truth = {i: self.recovery.get(i, self.on_disk[i]) for i in IDS}
        assert {i for i in IDS if self.session.newest(i)} == set(self.runs)  # the newest runs are restored
        assert set(self.session.slide_runs) == self.slides
        self.runs = {i: (r.roi, "") for i in IDS if (r := self.session.newest(i)) is not None}  # (of no model)
        self.newer_slides = set(self.slides)  # (the whole-slide runs are restored after the ROI runs)
        self.the_views_agree()  # before the image is shown: the recovered edits are scored from the first moment
        self._select("a")

    @rule(save=st.booleans())
    def reopen(self, save: bool) -> None:
        self._leave(save)
        run_here(self.session.open_dataset(Dataset.open(self.root)))
        self._truths_by_model()
        self._select("b")

    @precondition(lambda self: bool(self.session.result_ids))
    @rule()
    def export(self) -> None:
        """File > Export of every result, the viewer's command (`start_export`): its metric table holds each
        image's numbers against the truth this test expects (unsaved edits included), and nothing else runs."""
        session = self.session
        ids = tuple(session.result_ids)
        out = Path(self._folder.name) / "exports" / str(len(list(Path(self._folder.name).glob("exports/*"))))
        work = session.start_export(ExportChoices((), True, out, "all", ids, False))  # (the metric tables only)
        assert session.exporting
        try:
            *_, last = work()
        finally:
            assert not session.export_ended() and not session.exporting
        assert sorted(p.name for p in last.written) == ["metrics.csv", "metrics.json"]
        rows = {row["id"]: row for row in json.loads((out / "metrics.json").read_text(encoding="utf-8"))["images"]}
        assert sorted(rows) == sorted(ids)
        for item_id in ids:
            answer, truth = session.answer(item_id), self.truth[item_id]
            if truth is None:
                assert rows[item_id].get("foreground_dice") is None, item_id
                continue
            ref = reference(self.scored(item_id, answer), truth)
            got = [math.nan if rows[item_id][k] is None else rows[item_id][k]
                   for k in ("soft_dice", "foreground_dice", "foreground_iou", "precision", "recall")]
            assert all(map(same, got, (ref.soft_dice, ref.dice, ref.iou, ref.precision, ref.recall))), (item_id, got)
            if answer.source != WHOLE_SLIDE:  # (a slide is scored without the QA metrics, as eval --tile does)
                assert tuple(rows[item_id][k] for k in ("defect_tp", "defect_fp", "defect_fn")) == ref.defects

    @rule()
    def settle(self) -> None:
        """The window's scorer runs the due jobs: then every number is fresh, the dataset means too."""
        self.settle_scores()
        assert self.session.due() == []
        dice = []
        for item_id in IDS:
            view = item_view(self.session, item_id)
            assert view.fresh and not view.note.startswith("re-scoring"), view
            if view.answer is not None and self.truth[item_id] is not None:
                dice.append(reference(self.scored(item_id, view.answer), self.truth[item_id]).dice)
        found = [d for d in dice if not math.isnan(d)]
        mean = self.session.summary().means().get("foreground_dice")
        assert same(math.nan if mean is None else mean, float(np.mean(found)) if found else math.nan), (mean, dice)

    # ------------------------------------------------------------------------------------------ checks
    def expected_source(self, item_id: str) -> tuple[str, bool] | None:
        """(where the answer comes from, whether it is stale) by the rule of the issue: the newer of the image's
        run (while it is of its ROI and the open model) and its whole-slide run's part under the ROI, else the run,
        stale."""
        run = self.runs.get(item_id)
        model = self._backend().capabilities.details["model"]
        fits = run is not None and run[0] == self.session.roi_for(item_id) and run[1] in ("", model)
        if fits and item_id not in self.newer_slides:
            return RUN, False
        if item_id in self.slides:
            return WHOLE_SLIDE, False
        return (RUN, True) if run is not None else None

    def expected_status(self, item_id: str) -> str:
        """The row's Status: what answers for the image, and whether its mask has unsaved edits."""
        source = self.expected_source(item_id)
        run = self.runs.get(item_id)
        if source is None:
            status = ""
        elif source == (RUN, True):
            status = "ROI changed" if run is not None and run[0] != self.session.roi_for(item_id) else "other model"
        elif source == (WHOLE_SLIDE, False):
            status = "whole slide"
        else:
            status = "done" if self.truth[item_id] is not None else "done (no mask)"
        unsaved = (item_id == self.current and self.dirty) or item_id in self.unsaved
        return status + (UNSAVED_MARK if unsaved else "")

    def expected_truth(self, item_id: str) -> str:
        """What the row names as the truth: the saved correction where there is one, else the original."""
        item = self.session.dataset.item(item_id)
        corrected = corrected_mask_path(item.mask_path or item.image_path.with_name("mask.png"))
        name = corrected.name if corrected.exists() else (item.mask_path.name if item.mask_path else "")
        unsaved = (item_id == self.current and self.dirty) or item_id in self.unsaved
        return (f"{name} + unsaved edits" if name else "unsaved edits") if unsaved else (name or "no mask")

    @invariant()
    def the_views_agree(self) -> None:
        """Each image's row: what answers for it, its status, and its numbers when they say they are fresh (those
        of the answer against the truth this test expects); numbers that are not fresh say so."""
        session = self.session
        for item_id in IDS:
            view = item_view(session, item_id)
            answer = view.answer
            expected = self.expected_source(item_id)
            assert (None if answer is None else (answer.source, bool(answer.stale))) == expected, (item_id, view)
            assert view.status == self.expected_status(item_id), (item_id, view)
            assert view.truth == self.expected_truth(item_id), (item_id, view)
            if answer is None:
                assert view.metrics is None
                continue
            if not answer.stale:
                assert answer.result.roi == session.roi_for(item_id)
            if view.fresh:
                self.check_numbers(item_id, view.metrics, self.scored(item_id, answer), self.truth[item_id],
                                   answer.source == WHOLE_SLIDE)
            else:
                assert view.note, view  # numbers that do not answer say so
        # The means a view follows as they change are those of the images' numbers now, by the batch rule, and
        # say how many of those images count with their whole slide's numbers.
        running = session.running.means()
        whole = [i for i in IDS if self.expected_source(i) is not None and self.expected_source(i)[0] == WHOLE_SLIDE
                 and session.known_metrics(i) is not None]
        assert running.pop("images_whole_slide", 0) == len(whole)
        assert same_numbers(running, without_medians(session.summary().means()))

    def scored(self, item_id: str, answer) -> InferenceResult:
        """What an answer's numbers are of: its run, or for a whole-slide run's part the whole stitched slide (the
        slide's own numbers, whatever the ROI: issue 43)."""
        if answer.source != WHOLE_SLIDE:
            return answer.result
        stitched = self.session.slide_run_of(item_id).stitched
        whole = stitched.crop(stitched.region)
        assert whole is not None and whole.roi == Roi(0, 0, W, H)  # the slide, at scale 1
        return whole

    def check_numbers(self, item_id: str, metrics, result: InferenceResult, truth: np.ndarray | None,
                      slide: bool = False) -> None:
        if truth is None:
            assert metrics is None, item_id
            return
        ref = reference(result, truth)
        got = (metrics.soft_dice, metrics.foreground_dice, metrics.foreground_iou, metrics.precision, metrics.recall)
        assert all(map(same, got, (ref.soft_dice, ref.dice, ref.iou, ref.precision, ref.recall))), (item_id, got, ref)
        if slide:  # (a slide is scored without the QA metrics, as eval --tile does)
            return
        values = metrics.quality.values
        assert (values["defect_tp"], values["defect_fp"], values["defect_fn"]) == ref.defects, (item_id, values, ref)

    @invariant()
    def the_image_on_screen_is_shown_as_its_row_says(self) -> None:
        session = self.session
        shown = headline(session)
        if shown is None:
            return
        assert shown == item_view(session, self.current)
        assert session.truth(self.current).label.endswith("unsaved edits") == self.dirty or not session.ready
        if session.ready:
            mask = session.mask
            truth = self.truth[self.current]
            assert (mask is None and truth is None) or np.array_equal(mask, truth)  # the truth on screen
        review = review_input(session)
        if review is not None and review[0].result is not None:
            answer, mask = review
            codes = error_codes(argmax_at_roi(answer.result),
                                (mask[answer.result.roi.y0 : answer.result.roi.y1,
                                      answer.result.roi.x0 : answer.result.roi.x1] > 127).view(np.uint8))
            counts = {name: int(np.sum(codes == kind)) for kind, name in ERROR_NAMES.items()}
            assert counts == reference(answer.result, self.truth[self.current]).counts



TEMPLATE: list[Path] = []


def test_every_view_agrees_with_a_fresh_scoring(template: Path) -> None:
    TEMPLATE[:] = [template]
    machine = settings(max_examples=100, stateful_step_count=25, deadline=None, database=None, derandomize=True,
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])(SessionMachine)
    machine.TestCase().runTest()
