"""Which truth file an image is scored against: the original, or the saved correction (core/dataset/truth.py)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from segscope.core.dataset.dataset import Dataset
from segscope.core.dataset.truth import AUTO, CORRECTED, ORIGINAL, choice_note, truth_for
from segscope.core.errors import SegScopeError

GRAY = np.zeros((4, 6), np.uint8)


@pytest.fixture
def three(tmp_path, write_png):
    """a: mask and correction; b: mask only; c: no mask."""
    for item in "abc":
        write_png(tmp_path / item / "image.png", GRAY)
    write_png(tmp_path / "a" / "mask.png", GRAY)
    ones = GRAY.copy()
    ones[1, 1] = 255
    write_png(tmp_path / "a" / "mask_corrected.png", ones)
    write_png(tmp_path / "b" / "mask.png", GRAY)
    return tmp_path


def test_every_refused_truth_is_named_in_dataset_order(three):
    """The truths are checked on threads, and every refusal is named, in dataset order, even when a later truth's
    check ends first."""
    import threading

    import numpy as np

    from segscope.core.dataset.masks import histogram
    from segscope.core.dataset.preflight import prepare_truths
    from segscope.core.errors import Refusals

    b_checked = threading.Event()

    def cached(truth):  # a's check waits (at most 2 s, in case there is one thread) until b's has ended
        if truth.file_name(three).startswith("a/"):
            b_checked.wait(2)
            return histogram(np.array([[0, 7]], np.uint8))
        b_checked.set()
        return histogram(np.array([[0, 9]], np.uint8))

    with pytest.raises(Refusals) as refused:
        prepare_truths(Dataset.open(three), ("background", "defect"), counts=cached)
    assert [line.split(": values")[0] for line in refused.value.lines] == [
        str(three / "a" / "mask_corrected.png"), str(three / "b" / "mask.png")]
    assert "0, 7" in refused.value.lines[0] and "0, 9" in refused.value.lines[1]
    assert str(refused.value) == "2 truth masks are refused (each named above): fix them and run again"


def test_each_choice_names_the_file_its_kind_and_hash(three):
    dataset = Dataset.open(three)
    a, b, c = dataset.items
    assert truth_for(a, AUTO).kind == CORRECTED and truth_for(a, AUTO).path == three / "a" / "mask_corrected.png"
    assert truth_for(a, ORIGINAL).path == three / "a" / "mask.png"
    assert truth_for(b, AUTO).kind == ORIGINAL and truth_for(b, CORRECTED) is None
    assert truth_for(c, AUTO) is None and truth_for(c, ORIGINAL) is None
    described = truth_for(a, AUTO).describe(three)
    assert described == {"kind": "corrected", "file": "a/mask_corrected.png",
                         "sha256": hashlib.sha256((three / "a" / "mask_corrected.png").read_bytes()).hexdigest()}
    assert truth_for(a).brief(three) == f"corrected a/mask_corrected.png (sha256 {described['sha256'][:12]})"
    assert a.truth_path == three / "a" / "mask_corrected.png"  # the item's own rule is auto's


def test_the_dataset_reads_the_truth_of_its_choice(three):
    auto, original = Dataset.open(three), Dataset.open(three, truth=ORIGINAL)
    assert auto.load_mask(auto.item("a"))[1, 1] == 255
    assert original.load_mask(original.item("a"))[1, 1] == 0
    corrected = Dataset.open(three, truth=CORRECTED)
    assert corrected.load_mask(corrected.item("b")) is None and corrected.open_mask(corrected.item("b")) is None
    with pytest.raises(SegScopeError, match="--truth: 'newest' is not one of auto, original, corrected"):
        Dataset.open(three, truth="newest")


def test_the_images_with_a_truth_are_counted_by_the_datasets_choice(three, write_png):
    """a: mask and correction; b: mask only; c: no mask; then d: a correction alone (its original never saved)."""
    write_png(three / "d" / "image.png", GRAY)
    write_png(three / "d" / "mask_corrected.png", GRAY)
    counts = {choice: Dataset.open(three, truth=choice).truth_count() for choice in (AUTO, ORIGINAL, CORRECTED)}
    assert counts == {AUTO: 3, ORIGINAL: 2, CORRECTED: 2}


def test_the_run_says_once_how_many_images_use_a_correction(three, write_png):
    items = Dataset.open(three).items
    assert choice_note(items, AUTO) == ("truth: 1 of 3 images scored against their saved correction "
                                        "(mask_corrected.png) instead of the original mask; --truth original "
                                        "scores the originals")
    assert "1 saved correction(s) (mask_corrected.png) are not used" in choice_note(items, ORIGINAL)
    assert choice_note(items, CORRECTED).endswith("2 without one are scored as images without a mask")
    (three / "a" / "mask_corrected.png").unlink()
    assert choice_note(items, AUTO) is None and choice_note(items, ORIGINAL) is None
    with pytest.raises(SegScopeError, match="no image of the dataset has a saved correction"):
        choice_note(items, CORRECTED)


def test_truths_are_checked_from_counts_a_cache_already_holds(three):
    """`prepare_truths` takes each truth's value histogram from the caller when given (a decoded-input cache), and
    refuses by the same rule: sizes from the headers, then the values."""
    import numpy as np

    from segscope.core.dataset.masks import histogram
    from segscope.core.dataset.preflight import prepare_truths
    from segscope.core.errors import Refusals

    dataset = Dataset.open(three)
    asked = []

    def cached(truth):
        asked.append(truth.file_name(three))
        return histogram(np.array([[0, 1, 2]], np.uint8))  # what a cache would hold for a 0/1/2 mask

    with pytest.raises(Refusals) as refused:
        prepare_truths(dataset, ("background", "defect"), counts=cached)
    assert [line.split(": values 0, 1, 2 are not a mask convention")[0] for line in refused.value.lines] == [
        str(three / "a" / "mask_corrected.png"), str(three / "b" / "mask.png")]
    assert sorted(asked) == ["a/mask_corrected.png", "b/mask.png"]
    asked.clear()
    rule = prepare_truths(dataset, ("background", "defect", "scratch"), counts=cached)  # 3 classes: indices
    assert dataset.mask_rule is rule and sorted(asked) == ["a/mask_corrected.png", "b/mask.png"]


def test_an_original_a_replace_save_rewrote_is_named_replaced(three, tmp_path):
    """After the viewer's Replace save, mask.png holds the user's edits (its first version kept as mask.orig.png):
    its kind says so ("replaced", not "original"), and --truth original still chooses it."""
    import numpy as np

    from segscope.core.editing.files import save_mask

    mask_path = three / "b" / "mask.png"
    assert truth_for(Dataset.open(three).item("b")).kind == ORIGINAL
    edited = np.zeros((4, 6), np.uint8)
    edited[2, 2] = 255
    save_mask(edited, mask_path, "replace")
    assert (three / "b" / "mask.orig.png").is_file()
    item = Dataset.open(three).item("b")
    for choice in (AUTO, ORIGINAL):
        found = truth_for(item, choice)
        assert found.kind == "replaced" and found.path == mask_path
    assert truth_for(item, CORRECTED) is None
    assert Dataset.open(three).truth(item).brief(three).startswith("replaced b/mask.png (sha256 ")
