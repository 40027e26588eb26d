"""Two runs compared as the viewer steps them (`core.review.compare`, `Session.review.compare`): the tiny model (A,
run by the session) against the same network with the defect's logit raised (B), which calls a mid-grey block a
defect where A sees background. The planted difference (grey blocks in two of five images, of known size) is what
the queue lists, largest first; the rest of the images are alike. Expected boxes, areas and Dice by hand."""

from __future__ import annotations

import json
import math
import threading

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from segscope.core.backend_spec import BackendSpec, open_backend
from segscope.core.dataset.dataset import Dataset
from segscope.core.review.compare import LOW_DICE, Compared, PackedLabels, ParityEntry, ParityQueue, compare_steps
from segscope.core.review.parity import Flip, ImageParity
from segscope.core.roi import Roi
from segscope.core.session import review as review_module
from segscope.core.session.answers import WHOLE_SLIDE
from segscope.core.session.jobs import run_backend_job, run_here
from segscope.core.session.session import Session
from segscope.core.slides import open_slide
from segscope.core.wholeslide.evaluate import TilePlan

import helpers
from helpers import tiny_card

W, H = 120, 80
#: image -> the grey block planted in it (x0, y0, x1, y1), or None
PLANTED = {"a": None, "b": (40, 20, 60, 40), "c": None, "d": (70, 50, 80, 60), "e": None}


@pytest.fixture
def planted(tmp_path, write_png, tiny_model_project, monkeypatch):
    """Five images, each a dark 14 x 14 square (a defect both models see) and, in b and d, a mid-grey block only B
    calls a defect (b: 20 x 20 = 400 px, d: 10 x 10 = 100 px); empty masks in a and c (no truth is read by B).
    Returns (dataset folder, B's model card)."""
    root = tmp_path / "d"
    for name, block in PLANTED.items():
        image = np.full((H, W, 3), 210, np.uint8)
        image[10:24, 10:24] = 20
        if block is not None:
            x0, y0, x1, y1 = block
            image[y0:y1, x0:x1] = 140
        write_png(root / name / "image.png", image)
    write_png(root / "a" / "mask.png", np.zeros((H, W), np.uint8))
    write_png(root / "c" / "mask.png", np.zeros((H, W), np.uint8))
    monkeypatch.setattr(helpers, "TINY_BIAS", np.array([0.0, 0.7], np.float32))
    models = tiny_model_project.root / "models"
    helpers.make_tiny_onnx(models / "seesmore.onnx")
    card = models / "seesmore.json"
    card.write_text(json.dumps({**tiny_card(), "onnx": "seesmore.onnx", "om": "seesmore.om"}), encoding="utf-8")
    return root, card


def _session_run_by_a(root, pipeline) -> Session:
    session = Session(persist=False)
    run_here(session.open_dataset(Dataset.open(root)))
    with open_backend(BackendSpec("embedded", pipeline)) as backend:
        run_backend_job(session.run([item.id for item in session.dataset.items]), backend)
    return session


def test_the_planted_difference_is_listed_first_and_fails_the_gate(planted, tiny_model_project):
    root, card = planted
    session = _session_run_by_a(root, tiny_model_project.pipeline)
    roi = session.result("a").roi
    assert roi == Roi(0, 0, W, H)  # (the default ROI here: the whole slide, so the planted boxes are slide boxes)
    review = session.review
    parity = review.parity
    job = review.compare(BackendSpec("embedded", card), "seesmore")
    assert parity.active and parity.running and parity.total == 5 and len(parity) == 0
    run_here(job)
    assert not parity.running and parity.error == ""
    dark = 14 * 14
    assert [(e.image, e.kind, e.cls, e.bbox, e.area) for e in parity.entries()] == [
        ("b", "gained", 1, (40, 20, 60, 40), 400), ("d", "gained", 1, (70, 50, 80, 60), 100)]
    first = parity.entries()[0]
    a_there, b_there = first.preview  # both runs' classes in the place: A background, B the defect, all 20 x 20
    assert np.array_equal(a_there, np.zeros((20, 20), np.uint8)) and np.array_equal(b_there, np.ones((20, 20)))
    assert first.dice == pytest.approx(2 * dark / (dark + dark + 400))  # A: the square; B: the square and the block
    assert parity.run.images == 5 and parity.run.failed == 2 and not parity.run.passed
    assert parity.verdict() == ("Gate FAILED: 2 of 5 images compared fail (0 lost, 2 gained, 0 changed, lowest Dice "
                                f"{2 * dark / (2 * dark + 400):.4f})")
    assert parity.rule().startswith("no defect gained, lost or changed in class, and foreground Dice >= 0.99")
    assert parity.step(1) == first and parity.step(1).image == "d" and parity.step(1) == first  # (wraps around)
    assert parity.step(-1).image == "d"


def test_b_classes_are_kept_for_listed_images_only_and_shown_while_their_place_is_current(planted, tiny_model_project):
    """B's classes over the ROI are kept for b and d (listed), not for a, c and e (B agrees there); they are what the
    truth's panel shows while the current place's image is on screen (and the mask tools edit nothing), until the
    comparison is let go. Expected labels by hand: the dark square (both runs) and the planted block (B only)."""
    from segscope.core.session.views import actions

    root, card = planted
    session = _session_run_by_a(root, tiny_model_project.pipeline)
    review, parity = session.review, session.review.parity
    run_here(review.compare(BackendSpec("embedded", card), "seesmore on embedded"))
    for image, block in PLANTED.items():
        kept = parity.theirs(image)
        if block is None:
            assert kept is None
            continue
        expected = np.zeros((H, W), np.uint8)
        expected[10:24, 10:24] = 1
        x0, y0, x1, y1 = block
        expected[y0:y1, x0:x1] = 1
        roi, labels = kept
        assert roi == Roi(0, 0, W, H) and labels.dtype == np.uint8 and np.array_equal(labels, expected)
    assert review.b_on_screen() is None  # no place current yet
    run_here(session.select("b"))
    assert review.b_on_screen() is None and actions(session).edit
    assert parity.step(1).image == "b"
    shown = review.b_on_screen()
    assert shown is not None and shown.image == "b" and shown.labels is parity.theirs("b")[1]
    assert shown.title("Argmax") == "B, not the truth: Argmax of seesmore on embedded"
    assert not actions(session).edit and not actions(session).accept
    assert parity.step(1).image == "d" and review.b_on_screen() is None  # (d is not on screen)
    parity.step(1)
    assert review.b_on_screen() is not None
    parity.close()
    assert review.b_on_screen() is None and parity.theirs("b") is None and actions(session).edit


def test_a_model_against_itself_passes_and_lists_nothing(planted, tiny_model_project):
    root, _card = planted
    session = _session_run_by_a(root, tiny_model_project.pipeline)
    run_here(session.review.compare(BackendSpec("embedded", tiny_model_project.pipeline), "the same"))
    parity = session.review.parity
    assert len(parity) == 0 and parity.run.passed and parity.run.images == 5
    assert parity.verdict().startswith("Gate PASSED: 0 of 5 images compared fail")
    assert parity.step(1) is None


def test_nothing_to_compare_before_a_run(planted):
    from segscope.core.errors import SegScopeError

    root, card = planted
    session = Session(persist=False)
    run_here(session.open_dataset(Dataset.open(root)))
    with pytest.raises(SegScopeError, match="Run the images first"):
        session.review.compare(BackendSpec("embedded", card), "seesmore")


def test_a_cancelled_comparison_stops_and_says_so(planted, tiny_model_project):
    root, card = planted
    session = _session_run_by_a(root, tiny_model_project.pipeline)
    review = session.review
    job = review.compare(BackendSpec("embedded", card), "seesmore")
    steps = job.work()
    job.each(next(steps))  # a compared
    review.cancel_compare()
    for rest in steps:  # (the image in flight may still come)
        job.each(rest)
    job.finished()
    parity = review.parity
    assert parity.run.images < 5 and parity.error == "cancelled"
    assert parity.verdict().startswith("Gate stopped short (cancelled)")


def test_compare_steps_refuses_a_model_of_other_classes(planted, tiny_model_project):
    """A's results made to look three-class: B's two classes are refused in one line naming B."""
    from dataclasses import replace

    from segscope.core.errors import SegScopeError

    root, card = planted
    session = _session_run_by_a(root, tiny_model_project.pipeline)
    dataset = session.dataset
    first = {}
    for item in dataset.items:
        result = session.result(item.id)
        probabilities = np.concatenate([result.probabilities, np.zeros_like(result.probabilities[..., :1])], -1)
        first[item.id] = replace(result, probabilities=probabilities)
    with pytest.raises(SegScopeError, match="2 classes, but the model on screen has 3"):
        list(compare_steps(BackendSpec("embedded", card), dataset, dataset.items, first, threading.Event()))


# ------------------------------------------------------------------------- the queue's order and stepping
def _parity(image: str, order: int, dice: float, flips: list[tuple[str, int, int]]) -> ImageParity:
    return ImageParity(image, order, dice, tuple(Flip(kind, 1, (x, 0, x + 2, 2), area) for kind, x, area in flips))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.lists(st.tuples(st.sampled_from(["lost", "gained"]),
                                                              st.integers(0, 50), st.integers(1, 30)),
                                                    max_size=3, unique_by=lambda f: f[1])), min_size=1, max_size=6),
       st.lists(st.sampled_from([1, -1]), max_size=12))
def test_the_queue_orders_as_the_gate_ranks_and_steps_through_every_entry(images, steps):
    """Reference: entries sorted by (flipped pixels of the image, desc; flips, desc; Dice; order), then the flip's
    area (desc) and box; an image without a flip is one Dice entry when its Dice is under 0.99. Stepping from none
    goes to the first (or last), then moves one along that order, wrapping around."""
    queue = ParityQueue()
    queue.start("B", len(images), 0)
    expected = []
    for order, (dice, flips) in enumerate(images):
        queue.add(Compared(_parity(f"i{order}", order, dice, flips), Roi(0, 0, 10, 10)))
        pixels = sum(area for _, _, area in flips)
        image_rank = (-pixels, -len(flips), dice, order)
        if flips:
            expected += [(image_rank, -area, x, f"i{order}", kind) for kind, x, area in flips]
        elif dice < 0.99:
            expected.append((image_rank, -100, -1, f"i{order}", LOW_DICE))
    expected.sort()
    listed = [(e.image, e.kind, e.bbox[0] if e.kind != LOW_DICE else -1) for e in queue.entries()]
    assert listed == [(image, kind, x) for _, _, x, image, kind in expected]
    assert queue.run.failed == sum(1 for dice, flips in images if flips or dice < 0.99)
    position = None
    for offset in steps:
        got = queue.step(offset)
        if not listed:
            assert got is None
            continue
        position = (0 if offset > 0 else len(listed) - 1) if position is None else (position + offset) % len(listed)
        assert got == queue.entries()[position] == queue.current


def test_a_dice_entry_covers_the_roi():
    entry = ParityEntry("x", LOW_DICE, 0, 0, (5, 2, 115, 70), 110 * 68, 0.5, ())
    queue = ParityQueue()
    queue.start("B", 1, 0)
    queue.add(Compared(ImageParity("x", 0, 0.5, ()), Roi(5, 2, 115, 70)))
    assert [(e.kind, e.bbox, e.area) for e in queue.entries()] == [(entry.kind, entry.bbox, entry.area)]
    assert not math.isnan(queue.entries()[0].dice) and queue.entries()[0].preview is None  # (no flip to show)


class ParityQueueMachine(RuleBasedStateMachine):
    """The queue as images arrive while the reviewer steps (an image compared later may rank above the one on
    screen), against a plain sorted list: stepping always moves to the neighbour in the order of what is listed
    now, wrapping; B's classes are kept for exactly the images listed; a new comparison or a close lets everything
    go."""

    def __init__(self) -> None:
        super().__init__()
        self.queue = ParityQueue()
        self.queue.start("B", 10, 0)
        self.listed: list[tuple] = []  # (rank, key) of every entry, as the reference orders them
        self.images = 0
        self.kept: set[str] = set()  # the images with an entry (B's classes kept)

    @rule(dice=st.floats(0, 1), flips=st.lists(st.tuples(st.sampled_from(["lost", "gained"]), st.integers(0, 50),
                                                        st.integers(1, 30)), max_size=3, unique_by=lambda f: f[1]))
    def add(self, dice: float, flips: list) -> None:
        order = self.images
        self.images += 1
        theirs = PackedLabels.of(np.full((10, 10), order % 256, np.uint8))  # (each image's own, to tell them apart)
        self.queue.add(Compared(_parity(f"i{order}", order, dice, flips), Roi(0, 0, 10, 10), theirs=theirs))
        if flips or dice < 0.99:
            self.kept.add(f"i{order}")
        image_rank = (-sum(area for _, _, area in flips), -len(flips), dice, order)
        if flips:
            self.listed += [((image_rank, -area, (x, 0, x + 2, 2), kind), f"i{order}/{kind}/1/{x},0,{x + 2},2")
                            for kind, x, area in flips]
        elif dice < 0.99:
            self.listed.append(((image_rank, -100, (0, 0, 10, 10), LOW_DICE), f"i{order}/{LOW_DICE}/0/0,0,10,10"))
        self.listed.sort()

    @rule(offset=st.sampled_from([1, -1]))
    def step(self, offset: int) -> None:
        before = self.queue.current
        got = self.queue.step(offset)
        keys = [key for _, key in self.listed]
        if not keys:
            assert got is None
            return
        if before is None:
            expected = keys[0] if offset > 0 else keys[-1]
        else:
            expected = keys[(keys.index(before.key) + offset) % len(keys)]
        assert got is not None and got.key == expected and self.queue.current == got

    @precondition(lambda self: self.listed)
    @rule(pick=st.integers(0, 100))
    def go_to(self, pick: int) -> None:
        entry = self.queue.entries()[pick % len(self.listed)]
        self.queue.go_to(entry)
        assert self.queue.current == entry

    @rule()
    def restart(self) -> None:
        self.queue.close()
        assert self.queue.current is None and len(self.queue) == 0 and not self.queue.active
        self.queue.start("B again", 10, 0)
        self.listed, self.images, self.kept = [], 0, set()

    @invariant()
    def listed_as_the_reference(self) -> None:
        assert [entry.key for entry in self.queue.entries()] == [key for _, key in self.listed]
        assert self.queue.run.images == self.images
        for order in range(self.images + 1):  # (one past the last: never compared)
            kept = self.queue.theirs(f"i{order}")
            if f"i{order}" in self.kept:
                assert kept is not None and kept[0] == Roi(0, 0, 10, 10) and (kept[1] == order % 256).all()
            else:
                assert kept is None


TestParityQueue = ParityQueueMachine.TestCase
TestParityQueue.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)


def test_b_classes_are_kept_packed_and_given_back_exactly():
    """A listed image's B classes cost tens of KB, not a ROI's width x height bytes: a 2048 x 2048 map of three
    defects (4 MiB as uint8) is kept in under 64 KiB and comes back pixel for pixel."""
    labels = np.zeros((2048, 2048), np.uint8)
    labels[100:180, 200:900] = 1
    labels[1500:1530, 40:2000] = 2
    cv2.circle(labels, (1024, 1024), 90, 1, -1)
    packed = PackedLabels.of(labels)
    assert len(packed.data) < 64 * 1024
    assert np.array_equal(packed.unpack(), labels)


def test_an_image_answered_by_its_whole_slide_run_is_compared_by_its_roi_run(planted, tiny_model_project,
                                                                               monkeypatch):
    """B runs on A's ROIs, as `segscope review --against` compares two ROI runs: the same model as B finds no
    difference anywhere, though image b's numbers are those of its whole-slide run (in 30 x 30 tiles, another
    result than its ROI run's)."""
    root, _card = planted
    session = _session_run_by_a(root, tiny_model_project.pipeline)
    run_here(session.select("b"))
    with open_slide(session.current.image_path) as reader, \
            open_backend(BackendSpec("embedded", tiny_model_project.pipeline)) as backend:
        run_backend_job(session.run_whole_slide(reader, TilePlan((30, 30), overlap=8), 12), backend)
    answer = session.answer("b")
    assert answer is not None and answer.source == WHOLE_SLIDE
    ran = session.record("b").result
    assert not np.array_equal(answer.result.probabilities, ran.probabilities)  # (the tiled run is another result)
    compared_as_a = {}

    def steps(spec, dataset, items, first, *rest):
        compared_as_a.update(first)
        return compare_steps(spec, dataset, items, first, *rest)
    monkeypatch.setattr(review_module, "compare_steps", steps)
    parity = session.review.parity
    run_here(session.review.compare(BackendSpec("embedded", tiny_model_project.pipeline), "the same"))
    assert compared_as_a["b"] is ran and compared_as_a["a"] is session.record("a").result
    assert parity.error == "" and parity.run.images == 5 and parity.run.passed and len(parity) == 0
