"""The Qt-free session model: ROI ownership, one result store, metrics that follow the mask on screen."""

from __future__ import annotations

import csv
import gc
import weakref
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.dataset.dataset import Dataset
from segscope.core.evaluate import ImageEvaluation
from segscope.core.export.files import write_metrics
from segscope.core.metrics.scores import image_metrics
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.session.jobs import run_here
from segscope.core.session.running import Evaluated
from segscope.core.session.runs import RunHistory
from segscope.core.session.session import Session

from helpers import found_and_problems

W, H = 8, 6


def _dataset(tmp_path, write_png, with_mask=True):
    root = tmp_path / "d"
    truth = np.zeros((H, W), np.uint8)
    truth[0:2, 0:2] = 255  # 4 foreground pixels, top-left
    for name in ("a", "b"):
        write_png(root / name / "image.png", np.full((H, W, 3), 128, np.uint8))
        if with_mask:
            write_png(root / name / "mask.png", truth)
    return Dataset.open(root)


def _result(roi=None):
    """Predicts class 1 on the same top-left 2x2 block (the ROI is the whole slide: no resampling)."""
    roi = roi or Roi(0, 0, W, H)
    p1 = np.zeros((roi.height, roi.width), np.float32)
    p1[0:2, 0:2] = 1.0
    probabilities = np.stack([1 - p1, p1], axis=-1)
    return InferenceResult(probabilities, (p1 > 0.5).astype(np.uint8), roi, (W, H))


def test_a_dataset_another_replaces_is_freed_by_reference_counting(tmp_path, write_png):
    """The viewer takes what a session keeps out of the garbage collector's walks (gui/runtime/collector.py): a
    dataset another replaces, and the mask document of its image on screen, must go without a collection."""
    session = _loaded(tmp_path, write_png)
    dataset, document = weakref.ref(session.dataset), weakref.ref(session.document)
    gc.disable()
    try:
        run_here(session.open_dataset(_dataset(tmp_path / "other", write_png)))
        assert document() is None and dataset() is None
    finally:
        gc.enable()


def _hard_dice(pred, truth):
    """Foreground Dice by the textbook formula (reference for the tests)."""
    tp = np.sum(pred & truth)
    return 2 * tp / (np.sum(pred) + np.sum(truth))


def _loaded(tmp_path, write_png, with_mask=True):
    session = Session()
    run_here(session.open_dataset(_dataset(tmp_path, write_png, with_mask)))
    run_here(session.select("a"))  # reads the slide's size and mask
    assert session.ready and session.document.image_size == (W, H)
    return session


def _run(session, item_id="a", roi=None):
    item = session.dataset.item(item_id)
    result = _result(roi or session.roi_for(item_id))
    mask = session.dataset.load_mask(item)
    metrics = image_metrics(result, mask) if mask is not None else None
    return session.add_evaluation(ImageEvaluation(item, result, metrics), session.truth_versions()(item_id))


def _paint_extra(session):
    """Paint a 2x2 false negative at the bottom right of the truth."""
    editor = session.document.ensure_editor(2)
    editor.replace(np.full((2, 2), 255, np.uint8), Roi(W - 2, H - 2, W, H))
    session.document.edited()


def test_discard_restores_the_metrics_of_the_mask_on_disk(tmp_path, write_png):
    session = _loaded(tmp_path, write_png)
    seen = []
    session.events.scored.connect(lambda scored: seen.append((scored.item_id, scored.metrics.foreground_dice)))
    _run(session)
    assert session.metrics("a").foreground_dice == pytest.approx(1.0)
    _paint_extra(session)
    assert [d for _, d in seen] == pytest.approx([1.0]) and not session.is_fresh("a")  # an edit: stale ...
    # ... they are re-scored when read: 4 TP, 4 FN: 2*4 / (4 + 8)
    assert session.metrics("a").foreground_dice == pytest.approx(8 / 12)
    session.document.discard()
    assert not session.is_fresh("a") and session.known_metrics("a").foreground_dice == pytest.approx(8 / 12)
    assert session.metrics("a").foreground_dice == pytest.approx(1.0)
    assert [d for _, d in seen] == pytest.approx([1.0, 8 / 12, 1.0])


def test_a_run_taken_before_an_edit_is_scored_again_on_the_edited_truth(tmp_path, write_png):
    """A run scores on the mask file as it was when the run was asked for: its numbers do not answer for an image
    whose mask was edited before its result came back, nor for one that had unsaved edits then; one whose edits
    were saved before it was asked for answers at once."""
    session = _loaded(tmp_path, write_png)

    def run(meanwhile: Callable[[], object]) -> None:
        """The session's run job on "a" and "b", its results handed back (as the backend's thread does) after
        `meanwhile` happened; each scored on its mask file, as a run scores."""
        job = session.run(["a", "b"])
        meanwhile()
        for item_id in ("a", "b"):
            item = session.dataset.item(item_id)
            result = _result(session.roi_for(item_id))
            job.each(Evaluated(ImageEvaluation(item, result, image_metrics(result, session.dataset.load_mask(item)))))
        job.finished(False)

    run(lambda: _paint_extra(session))  # "a" edited after the run was asked for
    assert not session.is_fresh("a") and session.is_fresh("b")
    assert session.metrics("a").foreground_dice == pytest.approx(8 / 12)  # 4 TP, 4 FN: re-scored on the edits
    run(lambda: None)  # "a" has unsaved edits when the run is asked for
    assert not session.is_fresh("a") and session.metrics("a").foreground_dice == pytest.approx(8 / 12)
    session.document.save("corrected")  # the edits are the file now: a run scores on them, fresh at once
    run(lambda: None)
    assert session.is_fresh("a") and session.known_metrics("a").foreground_dice == pytest.approx(8 / 12)
    assert session.metrics("b").foreground_dice == pytest.approx(1.0)


def test_a_score_job_runs_anywhere_and_an_edit_meanwhile_drops_its_answer(tmp_path, write_png):
    session = _loaded(tmp_path, write_png)
    _run(session)
    stale, seen = [], []
    session.events.score_due.connect(lambda due: stale.append(due.item_id))
    session.events.scored.connect(lambda scored: seen.append(scored.metrics.foreground_dice))
    assert session.score_job("a") is None  # fresh: nothing to do
    _paint_extra(session)
    assert stale == ["a"]
    job = session.score_job("a")
    metrics = job.run()  # (a window runs it on a worker)
    _paint_extra(session)  # another edit before the answer is taken
    assert not session.adopt_score(job, metrics) and seen == [] and not session.is_fresh("a")
    newer = session.score_job("a")
    assert session.adopt_score(newer, newer.run()) and session.is_fresh("a")
    assert seen == pytest.approx([8 / 12]) and session.known_metrics("a").foreground_dice == pytest.approx(8 / 12)
    rows, _ = session.metrics_table_job(["a"])()
    assert rows[0]["foreground_dice"] == pytest.approx(8 / 12)


def test_saved_mask_and_exported_metrics_agree(tmp_path, write_png):
    session = _loaded(tmp_path, write_png)
    _run(session)
    _paint_extra(session)
    written = session.document.save("corrected")
    assert written.name == "mask_corrected.png"
    saved = cv2.imread(str(written), cv2.IMREAD_GRAYSCALE) > 127
    pred = np.zeros((H, W), bool)
    pred[0:2, 0:2] = True
    expected = _hard_dice(pred, saved)
    assert expected == pytest.approx(8 / 12)
    assert session.metrics("a").foreground_dice == pytest.approx(expected)
    rows, means = session.metrics_table()
    write_metrics(rows, means, tmp_path / "out")
    with open(tmp_path / "out" / "metrics.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert float(table[0]["foreground_dice"]) == pytest.approx(expected)
    assert float(table[0]["dice_1"]) == pytest.approx(expected)  # per class, one column each
    assert "dice" not in table[0]
    # after switching away, the metrics come from the saved file, not the in-memory document
    session.select("b")
    assert session.metrics("a").foreground_dice == pytest.approx(expected)


def test_edits_before_a_run_are_scored_when_it_arrives(tmp_path, write_png):
    session = _loaded(tmp_path, write_png)
    _paint_extra(session)
    _run(session)  # scored by the worker on the file, re-scored on the edited mask
    assert session.metrics("a").foreground_dice == pytest.approx(8 / 12)


def test_a_new_mask_is_adopted_by_the_dataset(tmp_path, write_png):
    session = _loaded(tmp_path, write_png, with_mask=False)
    _run(session)
    assert session.metrics("a") is None
    _paint_extra(session)
    written = session.document.save("replace")
    assert written == session.dataset.item("a").image_path.with_name("mask.png")
    assert session.current.mask_path == written and session.dataset.item("a").has_mask
    # truth: only the painted 2x2 block; prediction: the top-left 2x2 block -> no overlap
    assert session.metrics("a").foreground_dice == pytest.approx(0.0)


def test_a_run_uses_the_roi_snapshot_and_a_later_move_makes_it_stale(tmp_path, write_png):
    session = _loaded(tmp_path, write_png)
    plan = session.run_plan(["a"])
    moved = session.set_roi(Roi(1, 1, 5, 5))  # the user drags while the run is in flight
    _run(session, roi=plan["a"])
    assert session.roi == moved  # the run never moves the ROI back
    assert session.result("a").roi == plan["a"]
    assert session.is_stale("a")
    assert Dataset.open(session.dataset.root).stored_roi(session.dataset.item("a")) == moved


def test_roi_moves_are_undoable(tmp_path, write_png):
    session = _loaded(tmp_path, write_png)
    first = session.roi
    changes = []
    session.events.roi_changed.connect(lambda changed: changes.append(changed.roi))
    session.set_roi(Roi(1, 1, 5, 5))
    session.set_roi(Roi(2, 1, 6, 5))
    assert session.undo_roi() == "a" and session.roi == Roi(1, 1, 5, 5)
    assert session.undo_roi() == "a" and session.roi == first
    assert not session.roi_moves.can_undo and session.undo_roi() is None
    assert session.redo_roi() == "a" and session.roi == Roi(1, 1, 5, 5)
    assert changes == [Roi(1, 1, 5, 5), Roi(2, 1, 6, 5), Roi(1, 1, 5, 5), first, Roi(1, 1, 5, 5)]
    assert session.set_roi(Roi(-3, 0, 100, 100)) == Roi(0, 0, W, H)  # clamped into the image
    session.set_roi(Roi(1, 1, 5, 5))
    assert session.reset_roi() == first
    assert session.dataset.stored_roi(session.current) is None  # the default rule applies again
    assert session.undo_roi() == "a" and session.roi == Roi(1, 1, 5, 5)


def test_one_bounded_store_for_results(tmp_path, write_png):
    one_result = _result().probabilities.nbytes + _result().argmax.nbytes
    session = Session(RunHistory(max_result_bytes=one_result))
    run_here(session.open_dataset(_dataset(tmp_path, write_png)))
    _run(session, "a")
    _run(session, "b")
    assert len(session.history) == 2
    assert session.result("a") is None  # its arrays were dropped to stay in budget
    assert session.result("b") is not None
    assert session.result_ids == ["b"]
    assert session.has_metrics("a") and session.metrics("a").foreground_dice == pytest.approx(1.0)


def test_current_image_export_has_only_that_row(tmp_path, write_png):
    session = _loaded(tmp_path, write_png)
    _run(session, "a")
    _run(session, "b")
    rows, means = session.metrics_table(["b"])
    assert [r["id"] for r in rows] == ["b"] and means["images_with_masks"] == 1


def test_reopening_another_dataset_drops_its_runs(tmp_path, write_png):
    session = _loaded(tmp_path, write_png)
    _run(session)
    run_here(session.open_dataset(Dataset.open(session.dataset.root)))  # the same folder keeps its runs, metrics
    assert len(session.history) == 1 and session.metrics("a").foreground_dice == pytest.approx(1.0)
    other = tmp_path / "other"
    write_png(other / "x" / "image.png", np.zeros((H, W, 3), np.uint8))
    run_here(session.open_dataset(Dataset.open(other)))
    assert len(session.history) == 0 and session.current is None and not session.has_metrics("a")


def test_reopening_after_a_restart_restores_the_runs_rescored(tmp_path, write_png):
    session = _loaded(tmp_path, write_png)
    _run(session, "a")
    session.flush()
    root = session.dataset.root
    # meanwhile the mask of "a" changes on disk: the restored metrics follow the file, not the old number
    truth = np.zeros((H, W), np.uint8)
    truth[0:2, 0:4] = 255  # 8 foreground pixels, 4 of them predicted
    write_png(root / "a" / "mask.png", truth)
    again = Session()
    messages = []
    again.events.message.connect(messages.append)
    restoring = again.open_dataset(Dataset.open(root))  # another folder than before: its runs can be restored
    assert again.result("a") is None  # nothing read yet (a window reads on a worker)
    run_here(restoring)
    assert [m.text for m in messages] == [f"Opened {root}: 2 images, 2 with masks", f"Restored 1 earlier run of {root}"]
    restored = again.result("a")
    assert restored is not None and restored.roi == Roi(0, 0, W, H)
    np.testing.assert_array_equal(restored.probabilities, _result().probabilities)
    assert again.metrics("a").foreground_dice == pytest.approx(2 * 4 / (4 + 8))
    assert not again.has_metrics("b")


def test_the_store_stays_in_its_size_bound_and_skips_unreadable_files(tmp_path, write_png):
    from segscope.core.session.store import SessionStore

    dataset = _dataset(tmp_path, write_png)
    one = _result()
    one.threshold = 0.7  # the card's rule is kept with the result
    store = SessionStore(dataset.root, max_bytes=1)  # room for the newest file only
    store.save("a", one)
    store.save("b", one)
    assert [(s.image_id, s.result.threshold) for s in found_and_problems(store.results())[0]] == [("b", 0.7)]
    (store.folder / "broken.npz").write_bytes(b"not a zip")
    stored, problems = found_and_problems(store.results())
    assert [s.image_id for s in stored] == ["b"] and len(problems) == 1 and "broken.npz" in problems[0]


def test_a_session_without_persistence_writes_nothing(tmp_path, write_png):
    session = Session(persist=False)
    run_here(session.open_dataset(_dataset(tmp_path, write_png)))
    _run(session, "a")
    assert not (session.dataset.root / ".segscope-session").exists()


def test_a_store_that_cannot_write_is_reported_once_the_write_failed(tmp_path, write_png):
    dataset = _dataset(tmp_path, write_png)
    (dataset.root / ".segscope-session").write_text("a file where the folder should be")
    session = Session()
    run_here(session.open_dataset(dataset))
    failures = []
    session.events.message.connect(failures.append)
    _run(session, "a")
    session.flush()
    _run(session, "b")  # the earlier failure is reported in the caller's thread
    assert len(failures) == 1 and "results are kept for this session only" in failures[0].text
    assert failures[0].level == "warning"
    assert session.metrics("a").foreground_dice == pytest.approx(1.0)  # the session itself goes on


def _slide_session(root: Path, names: tuple[str, ...], mask: np.ndarray | None = None):
    """A session over 60 x 40 black images `names` (the first with `mask`, if given) and a stitched whole-slide
    result of it at scale 1: a 10 x 10 box of class 1 at (30, 10), P 0.75."""
    from segscope.core.wholeslide.tiling import Stitched

    for name in names:
        (root / name).mkdir(parents=True)
        cv2.imwrite(str(root / name / "image.png"), np.zeros((40, 60, 3), np.uint8))
    if mask is not None:
        cv2.imwrite(str(root / names[0] / "mask.png"), mask)
    session = Session(persist=False)
    run_here(session.open_dataset(Dataset.open(root)))
    probabilities = np.zeros((40, 60, 2), np.float32)
    probabilities[..., 0] = 1
    probabilities[10:20, 30:40] = (0.25, 0.75)
    stitched = Stitched(Roi(0, 0, 60, 40), 1.0, (60, 40), probabilities, probabilities.argmax(-1).astype(np.uint8),
                        None, np.ones((40, 60), bool))
    return session, session.dataset.item(names[0]), stitched


def test_a_whole_slide_run_gives_any_roi_of_its_slide_a_result(tmp_path):
    from segscope.core.wholeslide.evaluate import TiledEvaluation

    session, item, stitched = _slide_session(tmp_path / "ds", ("a", "b"))
    heard = []
    session.events.slide_run_added.connect(lambda added: heard.append((added.run, added.restored)))
    run = TiledEvaluation(item, stitched, 4, None, 1.0)
    session.add_slide_run(run)
    assert heard == [(run, False)] and session.slide_run_of("a") is run
    result = session.stitched_result("a", Roi(25, 5, 45, 25))
    assert result is not None and result.roi == Roi(25, 5, 45, 25)
    assert result.argmax.sum() == 10 * 10  # the 10 x 10 box of class 1 lies inside this ROI
    assert session.stitched_result("b", Roi(25, 5, 45, 25)) is None  # another image's slide
    (tmp_path / "other" / "c").mkdir(parents=True)
    cv2.imwrite(str(tmp_path / "other" / "c" / "image.png"), np.zeros((8, 8, 3), np.uint8))
    run_here(session.open_dataset(Dataset.open(tmp_path / "other")))  # another folder: its ids name other images
    assert session.slide_runs == {}


def test_a_whole_slide_runs_numbers_are_the_slides_whatever_the_roi_and_follow_its_truth(tmp_path):
    """Issue 43: the numbers of an image a whole-slide run answers for are the slide's own (not the part under
    its ROI's), adopted from the run when it scored the mask file the image has now, else scored again (edits:
    tests/core/test_session_model.py). Expected values by hand: a 10 x 10 predicted box against a truth box of
    10 x 20 holding it."""
    from segscope.core.metrics import catalogue
    from segscope.core.wholeslide.evaluate import TiledEvaluation, score_stitched

    mask = np.zeros((40, 60), np.uint8)
    mask[10:20, 30:50] = 255  # 200 true pixels, the prediction's 100 among them
    session, item, stitched = _slide_session(tmp_path / "ds", ("a",), mask)
    run = TiledEvaluation(item, stitched, 4, score_stitched(session.dataset, item, stitched), 1.0)
    session.set_roi(Roi(0, 0, 20, 20), "a")  # a corner with nothing in it: its part's Dice would be n/a
    session.add_slide_run(run, scored_on=session.truth_versions()("a"))
    assert session.score_job("a") is None  # the run's own numbers adopted: nothing to score again
    assert session.known_metrics("a").foreground_dice == pytest.approx(2 * 100 / (100 + 200))
    session.set_roi(Roi(20, 0, 60, 40), "a")  # another part: the same numbers, still fresh
    assert session.is_fresh("a") and session.metrics("a").foreground_dice == pytest.approx(2 * 100 / 300)
    means = session.running.means()  # (the status bar's) say that the image counts with its whole slide's
    assert means["images_with_masks"] == means["images_whole_slide"] == 1
    assert means["foreground_dice"] == pytest.approx(2 * 100 / 300)
    assert "(1 image, 1 over its whole slide)" in catalogue.brief_means(means)

    session.add_slide_run(run)  # scored on a truth not known: scored again, to the same numbers
    assert session.score_job("a") is not None
    assert session.metrics("a").foreground_dice == pytest.approx(2 * 100 / 300)


def test_whole_slide_runs_are_kept_on_disk_and_restored_rescored(tmp_path, write_png):
    from segscope.core.wholeslide.evaluate import TiledEvaluation, TilePlan
    from segscope.core.wholeslide.tiling import Stitched

    session = _loaded(tmp_path, write_png)
    root = session.dataset.root
    probabilities = np.zeros((H, W, 2), np.float32)
    probabilities[..., 0] = 1
    probabilities[0:2, 0:4] = (0.2, 0.8)  # 8 px predicted; the truth has the 4 px of the top-left block
    seams = np.linspace(0, 1, H * W, dtype=np.float32).reshape(H, W)
    covered = np.ones((H, W), bool)
    covered[-1, -1] = False
    stitched = Stitched(Roi(0, 0, W, H), 1.0, (W, H), probabilities, probabilities.argmax(-1).astype(np.uint8),
                        seams, covered)
    plan = TilePlan((4, 4), overlap=1, seams=True)
    session.add_slide_run(TiledEvaluation(session.dataset.item("a"), stitched, 6, None, 2.5, plan))
    session.flush()

    again = Session()
    heard, messages = [], []
    again.events.slide_run_added.connect(lambda added: heard.append(added.restored))
    again.events.message.connect(messages.append)
    run_here(again.open_dataset(Dataset.open(root)))
    assert heard == [True] and [m.level for m in messages] == ["info", "info"]  # opened, restored: nothing wrong
    run = again.slide_run_of("a")
    assert (run.tiles, run.seconds, run.plan) == (6, 2.5, plan)
    for name in ("probabilities", "argmax", "seams", "covered"):
        np.testing.assert_array_equal(getattr(run.stitched, name), getattr(stitched, name))
    assert (run.stitched.region, run.stitched.scale, run.stitched.slide_size) == (Roi(0, 0, W, H), 1.0, (W, H))
    assert run.metrics.foreground_dice == pytest.approx(2 * 4 / (8 + 4))  # scored against the mask on disk


def test_a_run_plan_needs_no_file_of_an_image_never_shown(tmp_path, write_png):
    session = _loaded(tmp_path, write_png)
    (session.dataset.root / "b" / "image.png").write_bytes(b"not an image")  # unreadable: the run says so
    plan = session.run_plan(["a", "b"])
    assert plan == {"a": session.roi_for("a")}  # "b": left to the run, which reads its size (or fails on it)


def test_the_qa_metrics_asked_for_join_every_score_and_one_taken_before_a_change_is_dropped(tmp_path, write_png):
    from segscope.core.quality.spec import MetricSpec

    session = _loaded(tmp_path, write_png)
    _run(session)
    basis = session.metrics("a")
    assert basis.quality is None
    announced = []
    session.events.scored.connect(lambda scored: announced.append(scored.metrics))
    session.set_quality_spec(MetricSpec.parse("hd95"))
    assert not session.is_fresh("a")  # scored without them: stale
    quality = session.metrics("a").quality  # scored again, with them
    assert quality.values["hd95"] == 0.0 and announced[-1].quality is quality  # the prediction is the truth
    assert session.metrics("a").soft_dice == basis.soft_dice
    _paint_extra(session)
    late = session.score_job("a")  # taken before the QA metrics change again: its answer is dropped
    session.set_quality_spec(MetricSpec())
    assert not session.adopt_score(late, late.run())
    assert session.metrics("a").quality is None and session.metrics("a").soft_dice != basis.soft_dice


def test_the_qa_metrics_asked_for_are_scored_on_the_mask_on_screen(tmp_path, write_png):
    from segscope.core.quality.spec import MetricSpec

    spec = MetricSpec.parse("defect_f1")
    session = _loaded(tmp_path, write_png)
    _run(session)
    _paint_extra(session)  # a second true defect, bottom right, that the prediction misses
    session.set_quality_spec(spec)  # every image is scored again with them
    job = session.score_job("a")
    assert job is not None and job.quality == spec
    quality = job.run().quality  # (a window runs it on a worker)
    # truth: the 2x2 block found (TP) and the painted 2x2 block missed (FN); F1 = 2*1 / (2*1 + 0 + 1)
    assert (quality.values["defect_tp"], quality.values["defect_fp"], quality.values["defect_fn"]) == (1, 0, 1)
    assert quality.values["defect_f1"] == pytest.approx(2 / 3)
    assert session.metrics("a").quality.values == quality.values
    assert session.score_job("b") is None  # never run: nothing to score


def test_a_whole_slide_run_over_the_stores_bound_is_kept_for_the_session_and_drops_the_older_stored_one(
        tmp_path, write_png):
    from segscope.core.wholeslide.evaluate import TiledEvaluation, TilePlan
    from segscope.core.wholeslide.tiling import Stitched

    session = _loaded(tmp_path, write_png)
    failures = []
    session.events.message.connect(lambda message: message.level != "info" and failures.append(message))

    def run(scale: float) -> TiledEvaluation:
        out_w, out_h = round(W * scale), round(H * scale)
        probabilities = np.full((out_h, out_w, 2), 0.5, np.float32)
        stitched = Stitched(Roi(0, 0, W, H), scale, (W, H), probabilities, np.zeros((out_h, out_w), np.uint8),
                            None, np.ones((out_h, out_w), bool))
        return TiledEvaluation(session.dataset.item("a"), stitched, 4, None, 1.0, TilePlan((4, 4), 1))

    small, big = run(0.5), run(1.0)
    session.store.max_bytes = small.stitched.nbytes + 100  # room for the small run, not the big one
    assert session.store.keeps(small.stitched.nbytes) and not session.store.keeps(big.stitched.nbytes)
    session.add_slide_run(small)
    session.flush()
    assert len(list(session.store.slides_folder.glob("*.npz"))) == 1
    session.add_slide_run(big)
    session.flush()
    assert session.slide_run_of("a") is big  # kept for the session
    assert list(session.store.slides_folder.glob("*.npz")) == []  # the replaced run is not restored later
    _run(session, "b")
    assert failures == []  # the viewer said it when it planned the run; nothing failed


def test_masks_read_by_another_rule_are_scored_again_by_it(tmp_path, write_png):
    """A run scored before the model was known (e.g. restored at open) is scored again once the model's card says
    how its masks are read: here 1 is background and 0 the defect, the inverse of the binary 0/1 convention."""
    from segscope.core.backends.base import Capabilities
    from segscope.core.session.backend_state import BackendState

    root = tmp_path / "d"
    mask = np.zeros((H, W), np.uint8)
    mask[0:2, 0:2] = 1
    for name in ("a", "b"):
        write_png(root / name / "image.png", np.full((H, W, 3), 128, np.uint8))
        write_png(root / name / "mask.png", mask)
    backend = BackendState("the model")
    session = Session(backend=backend)
    run_here(session.open_dataset(Dataset.open(root)))
    run_here(session.select("a"))
    _run(session, "a")
    assert session.metrics("a").foreground_dice == pytest.approx(1.0)  # by the binary convention: 1 is the defect
    backend.opened(Capabilities("embedded", "CPU", (W, H), ("background", "defect"), {"truth_values": "0:1,1:0"}))
    assert session.read_truths_by_model() and not session.is_fresh("a")
    run_here(session.select("a"))  # the image on screen has its mask read again (the viewer's commands do it)
    predicted = np.zeros((H, W), bool)
    predicted[0:2, 0:2] = True
    assert session.metrics("a").foreground_dice == pytest.approx(_hard_dice(predicted, mask == 0))  # 0: no overlap
    assert not session.read_truths_by_model()  # the same rule again: nothing to do


def test_a_stage_timed_after_the_run_joins_its_newest_run_once_and_is_announced(tmp_path, write_png):
    """The viewer's "render" time: a session command with an event, never written into a record from outside."""
    session = _loaded(tmp_path, write_png)
    timed = []
    session.events.run_timed.connect(lambda event: timed.append((event.item_id, event.stage)))
    first = _run(session)
    assert session.add_timing(first, "render", 0.25)
    assert first.timings["render"] == 0.25 and timed == [("a", "render")]
    assert not session.add_timing(first, "render", 0.5)  # once
    second = _run(session)
    assert not session.add_timing(first, "other", 0.1)  # no longer the image's run
    assert session.add_timing(second, "render", 0.125) and second.timings["render"] == 0.125
    assert "other" not in first.timings and timed == [("a", "render"), ("a", "render")]


def test_the_session_owns_the_export_its_flag_and_its_cancel(tmp_path, write_png):
    from segscope.core.errors import CancelledError, SegScopeError
    from segscope.core.export.job import ExportChoices
    from segscope.core.session.views import actions

    session = _loaded(tmp_path, write_png)
    assert not session.can_export and not actions(session).export  # nothing to write yet
    _run(session, "a")
    _run(session, "b")
    out = tmp_path / "out"
    choices = ExportChoices(("mask",), True, out, "all", ("a", "b"), False)
    assert Session().can_export is False  # nothing open
    assert actions(session).export and not actions(session).cancel_export and session.can_export
    work = session.start_export(choices)
    assert not session.can_export  # one at a time
    assert session.exporting and not actions(session).export and actions(session).cancel_export
    with pytest.raises(SegScopeError, match="an export is running"):
        session.start_export(choices)
    steps = work()
    next(steps)  # the folder is staged; the first image is next
    session.cancel_export()
    with pytest.raises(CancelledError, match="cancelled after 0 of 2 images"):
        list(steps)
    assert session.export_ended() and not session.exporting
    assert not out.exists() or list(out.iterdir()) == []  # left as it was

    *_, last = session.start_export(choices)()
    assert not session.export_ended() and not session.exporting
    assert sorted(p.name for p in last.written) == sorted(p.name for p in out.iterdir()) == [
        "a_mask.png", "a_provenance.json", "b_mask.png", "b_provenance.json", "metrics.csv", "metrics.json"]


def test_truths_read_ahead_on_a_worker_are_taken_without_reading_their_files_again(tmp_path, write_png,
                                                                                     monkeypatch):
    """The rows a dataset shows when it opens have their truths read with the listing (`truth_files`): the session
    takes them as read now (no file read in its thread), and reads the others when asked, as before."""
    from segscope.core.files import stamp as stamp_module
    from segscope.core.session.truth import truth_files

    dataset = _dataset(tmp_path, write_png)
    write_png(dataset.root / "b" / "mask_corrected.png", np.zeros((H, W), np.uint8))
    read = truth_files(dataset, dataset.items[:1])  # a: its original mask
    assert list(read) == ["a"] and read["a"][0].path == dataset.root / "a" / "mask.png"
    session = Session(persist=False)
    run_here(session.open_dataset(dataset, read))
    looked: list[object] = []
    stat = stamp_module.Stamp.of
    monkeypatch.setattr(stamp_module.Stamp, "of", classmethod(lambda cls, path, content=False: looked.append(path)
                                                              or stat(path, content)))
    a = session.truth("a")
    assert (a.path, a.stamp, a.version, looked) == (read["a"][0].path, read["a"][1], session.truth_version("b"), [])
    assert session.truth("b").path == dataset.root / "b" / "mask_corrected.png" and looked  # read when asked


def test_checking_every_truth_can_be_stopped_between_masks(tmp_path, write_png, monkeypatch):
    """The check of every mask gives its runner a chance to stop it every `CHECKED_BETWEEN_YIELDS` masks (a window
    closed while 100,000 are checked does not wait for them all); stopped there, it checks no more."""
    from segscope.core.dataset.preflight import set_mask_rule
    from segscope.core.session import session as session_module

    every = session_module.CHECKED_BETWEEN_YIELDS
    root = tmp_path / "many"
    mask = np.zeros((4, 4), np.uint8)
    for n in range(every + 5):
        write_png(root / f"{n:04d}.png", np.zeros((4, 4, 3), np.uint8))
        write_png(root / f"{n:04d}_mask.png", mask)
    session = Session()
    run_here(session.open_dataset(Dataset.open(root)))
    set_mask_rule(session.dataset, ["background", "defect"])
    checked: list[str] = []
    real = session_module.truth_refusal
    monkeypatch.setattr(session_module, "truth_refusal",
                        lambda dataset, item, truth: checked.append(item.id) or real(dataset, item, truth))
    steps = session.check_truths().work()
    assert next(steps) is None  # nothing refused: a chance to stop, after the first `every` masks
    steps.close()
    assert checked == [f"{n:04d}" for n in range(every)]


def test_a_reopen_with_a_model_open_scores_the_stored_runs_once_by_its_rule_and_checks_the_masks_once(
        tmp_path, write_png):
    """A dataset reopened (as after a restart) while a model is open: the stored runs are scored on the restore's
    worker by the model's mask rule, so none is stale afterwards (none is scored again); the masks are checked once
    for that dataset and rule."""
    from segscope.core.backends.base import Capabilities
    from segscope.core.session.backend_state import BackendState

    first = _loaded(tmp_path, write_png)
    _run(first, "a")
    _run(first, "b")
    first.flush()
    backend = BackendState("the model")
    backend.opened(Capabilities("embedded", "CPU", (W, H), ("background", "defect"), {}))
    again = Session(backend=backend)
    run_here(again.open_dataset(Dataset.open(first.dataset.root)))
    assert again.answered_ids(again.dataset) == ["a", "b"]
    assert again.due() == []  # scored by the rule they are read by: nothing stale
    assert again.known_metrics("a").foreground_dice == pytest.approx(1.0)  # the run predicts the truth's block
    check = again.truths_by_model()
    assert check is not None
    run_here(check)
    assert again.truths_by_model() is None  # the same dataset and rule: checked already
    assert again.due() == []
