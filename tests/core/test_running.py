"""The session's runner (`core.session.running.batch_steps`) as `eval` drives it: the first error ends the run with
that very error after the images before it, and an image with no ROI picked goes to the stream as the stream takes
it. Expected values are by hand (which images, in which order, which ROI) and from the dataset's files."""

from __future__ import annotations

import threading

import pytest

from segscope.core.backends.registry import open_kind
from segscope.core.dataset.dataset import Dataset
from segscope.core.errors import SegScopeError
from segscope.core.quality.spec import MetricSpec
from segscope.core.roi import Roi
from segscope.core.session.running import Batch, Evaluated, Failed, batch_steps, describe_error, raise_error
from segscope.core.stream.input import PRE_CROP_NOTE, StreamInput


def _nothing(done: int, total: int) -> None:
    return None


def _batch(dataset: Dataset, stream: StreamInput, **eval_like: bool) -> Batch:
    return Batch(dataset, tuple(dataset.items), {}, {}, {}, stream, MetricSpec(), **eval_like)


def test_eval_s_batch_ends_at_the_first_error_with_that_error(tiny_model_project, small_dataset):
    image = small_dataset / "2" / "image.png"
    image.write_bytes(image.read_bytes()[:60])  # its header reads, its pixels do not
    dataset = Dataset.open(small_dataset)
    assert [item.id for item in dataset.items] == ["1", "2", "3", "10"]  # (natural order)
    backend, _note = open_kind("embedded", tiny_model_project.pipeline)
    stream = StreamInput.of(tiny_model_project.pipeline)
    with backend:
        seen: list[str] = []
        with pytest.raises(SegScopeError, match=str(image)):
            for step in batch_steps(_batch(dataset, stream, default_rois=False, stamps=False), backend,
                                    threading.Event(), _nothing, raise_error):
                assert isinstance(step, Evaluated)
                seen.append(step.evaluation.item.id)
        assert seen == ["1"]
        # the viewer's policy words the same error as the image's failure and runs the others
        steps = list(batch_steps(_batch(dataset, stream), backend, threading.Event(), _nothing, describe_error))
    assert [(type(s).__name__, s.item_id if isinstance(s, Failed) else s.evaluation.item.id) for s in steps] == \
        [("Evaluated", "1"), ("Failed", "2"), ("Evaluated", "3"), ("Evaluated", "10")]
    failed = steps[1]
    assert isinstance(failed, Failed) and str(image) in failed.text


def test_without_default_rois_a_stream_without_a_crop_is_sent_the_whole_image(tiny_model_project, small_dataset):
    dataset = Dataset.open(small_dataset)
    backend, _note = open_kind("embedded", tiny_model_project.pipeline)
    no_crop = StreamInput(tiny_model_project.pipeline, None, region_reads=True)  # (the rule without a crop)
    picked = Roi(8, 8, 40, 40)
    with backend:
        def rois(batch: Batch) -> list[Roi]:
            steps = batch_steps(batch, backend, threading.Event(), _nothing, raise_error)
            return [s.evaluation.result.roi for s in steps if isinstance(s, Evaluated)]

        whole = rois(_batch(dataset, no_crop, default_rois=False, stamps=False))
        chosen = rois(Batch(dataset, tuple(dataset.items), dict.fromkeys(["1", "2", "3", "10"], picked), {}, {},
                            no_crop, MetricSpec(), default_rois=False, stamps=False))
    assert whole == [Roi(0, 0, 64, 48)] * 4  # the 64x48 slides, whole
    assert chosen == [picked] * 4


def test_the_viewer_s_batch_reads_each_image_s_roi_as_it_goes_and_one_unreadable_fails_in_its_place(
        tiny_model_project, small_dataset):
    """The viewer's rule (`default_rois`): an image never shown is run on the dataset's ROI for it, which a stream
    without a crop gets cropped by SegScope (its note says so), not the whole image as `eval` sends it; an image
    whose header cannot be read fails in its own place, the others run."""
    (small_dataset / "3" / "image.png").write_bytes(b"not an image")
    dataset = Dataset.open(small_dataset)
    backend, _note = open_kind("embedded", tiny_model_project.pipeline)
    no_crop = StreamInput(tiny_model_project.pipeline, None, region_reads=True)
    with backend:
        steps = list(batch_steps(_batch(dataset, no_crop, stamps=False), backend, threading.Event(), _nothing,
                                 describe_error))
        whole = [s.evaluation.result for s in batch_steps(_batch(dataset, no_crop, default_rois=False, stamps=False),
                                                          backend, threading.Event(), _nothing, describe_error)
                 if isinstance(s, Evaluated)]
    assert [(type(s).__name__, s.item_id if isinstance(s, Failed) else s.evaluation.item.id) for s in steps] == \
        [("Evaluated", "1"), ("Evaluated", "2"), ("Failed", "3"), ("Evaluated", "10")]
    failed = steps[2]
    assert isinstance(failed, Failed) and str(small_dataset / "3" / "image.png") in failed.text
    results = [s.evaluation.result for s in steps if isinstance(s, Evaluated)]
    assert [r.roi for r in results] == [Roi(0, 0, 64, 48)] * 3  # the 64x48 slides: the default ROI does not fit
    assert all(r.roi_note == PRE_CROP_NOTE for r in results)  # cropped before the stream, as the viewer shows it
    assert [r.roi_note for r in whole] == [""] * 3  # eval's: the whole file, as MindX resizes it


def test_the_viewer_s_batch_runs_a_never_shown_image_on_a_default_roi_smaller_than_the_slide(
        tiny_model_project, small_dataset):
    """ROI != slide: the dataset's default ROI fits the 64x48 slides, so a never-shown image is run on it (cropped
    before a stream without a crop, then resized to the model's 960x960 input, as the stream's resize does)."""
    default = Roi(8, 4, 40, 36)  # 32x32 of the 64x48 slides
    dataset = Dataset.open(small_dataset, default_roi=default)
    backend, _note = open_kind("embedded", tiny_model_project.pipeline)
    no_crop = StreamInput(tiny_model_project.pipeline, None, region_reads=True)
    with backend:
        results = [s.evaluation.result for s in batch_steps(_batch(dataset, no_crop, stamps=False), backend,
                                                            threading.Event(), _nothing, describe_error)]
    assert [r.roi for r in results] == [default] * 4
    assert all(r.roi_note == PRE_CROP_NOTE for r in results)  # the 32x32 ROI cropped, not the slide
    assert all(r.probabilities.shape[:2] == r.argmax.shape == (960, 960) for r in results)  # the tiny card's input
