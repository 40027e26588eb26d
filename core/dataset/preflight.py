"""What a run checks before its first image, so it stops before image 1 (having printed and exported
nothing) instead of at the image whose file is wrong: every image's header (`check_sizes_up_front`, before
the backend opens), then each truth mask's size from its header and its values by their histogram against the
model's mask rule (`truth_refusal`, `core.dataset.masks.MaskRule`), so every mask that would be misread is named,
each in its line, before any result is printed (`prepare_truths`). The viewer reads a dataset by the same rule
(`set_mask_rule`) and checks each truth as `eval` does (`truth_refusal`)."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ..cache.decoded import read_truth
from ..errors import Refusals, SegScopeError
from ..metrics.scores import check_sizes
from ..roi import Roi
from ..slides import slide_kind_for, slide_size
from ..slides.masks import MaskReader
from .dataset import Dataset, DatasetItem
from .masks import MaskRule, histogram
from .truth import Truth

#: Mask pixels counted at once (a tiled TIFF mask is read band by band, never whole).
BAND_PIXELS = 64 << 20


def mask_counts(reader: MaskReader) -> np.ndarray:
    """The value `histogram` of a whole mask, read in bands of rows."""
    width, height = reader.size
    rows = max(1, BAND_PIXELS // max(width, 1))
    counts = np.zeros(256, np.int64)
    for top in range(0, height, rows):
        counts += histogram(reader.read_roi(Roi(0, top, width, min(height, top + rows))))
    return counts


def check_sizes_up_front(dataset: Dataset, items: Sequence[DatasetItem] | None = None) -> None:
    """Raise, in one line naming the file, at the first image of `items` (default: all) whose header cannot be
    read. Nothing is decoded; the truths are `prepare_truths`' (all of them named at once)."""
    for item in items if items is not None else dataset.items:
        dataset.image_size(item)


def set_mask_rule(dataset: Dataset, class_names: Sequence[str], details: Mapping[str, str] | None = None) -> MaskRule:
    """Read the dataset's masks by the rule of the model (`class_names`, its backend's `details` with a card's
    truth_values) from now on: `eval`'s and the viewer's one place where that rule is chosen."""
    rule = MaskRule.for_model(len(class_names) or 2, details)
    dataset.mask_rule = rule
    return rule


def check_truth(dataset: Dataset, truth: Truth, counts: Callable[[Truth], np.ndarray] | None = None) -> None:
    """Refuse (`SegScopeError`, one line naming the file and its values) a truth file that the dataset's mask rule
    (`set_mask_rule`) does not read. `counts(truth)`: the value `histogram` of its decoded mask where the caller
    has it (a decoded-input cache); by default the mask is read here."""
    read_by = dataset.rule_for(truth)  # the card's values for originals, the conventions for corrections
    assert read_by is not None, "check_truth before set_mask_rule"
    if counts is not None:
        read_by.check(counts(truth), str(truth.path))
    elif slide_kind_for(truth.path, mask=True).name != "tiff":  # read whole: its counts kept in the decoded-input cache
        read_by.check(read_truth(truth.path, dataset.max_pixels).counts, str(truth.path))
    else:
        with MaskReader(truth.path, dataset.max_pixels) as reader:
            read_by.check(mask_counts(reader), str(truth.path))


def truth_refusal(dataset: Dataset, item: DatasetItem, truth: Truth,
                  counts: Callable[[Truth], np.ndarray] | None = None) -> str | None:
    """Why `truth` (the truth of `item`) cannot be scored, in the one line `eval` and the viewer say it (a header
    that cannot be read, a size other than the image's, values the dataset's mask rule does not read:
    `check_truth`), or None when it can. The one rule both run for every truth before a result."""
    try:
        check_sizes(slide_size(truth.path, dataset.max_pixels, mask=True), dataset.image_size(item),
                    str(truth.path))
        check_truth(dataset, truth, counts)
    except SegScopeError as exc:
        return str(exc)
    return None


def prepare_truths(dataset: Dataset, class_names: Sequence[str], details: Mapping[str, str] | None = None,
                   items: Sequence[DatasetItem] | None = None,
                   counts: Callable[[Truth], np.ndarray] | None = None) -> MaskRule:
    """Set the dataset's mask rule for the model (`set_mask_rule`) and check every truth of `items` (default:
    all) by `truth_refusal`; any refused are one `Refusals` naming each file, in dataset order."""
    rule = set_mask_rule(dataset, class_names, details)
    truths = ((item, t) for item, t in ((item, dataset.truth(item))
                                       for item in (items if items is not None else dataset.items)) if t)
    workers = os.cpu_count() or 1
    pool = ThreadPoolExecutor(workers, thread_name_prefix="segscope-truths")
    pending: deque[Future[str | None]] = deque()  # a few per thread: 100,000 masks are never all submitted at once
    refused: list[str] = []  # (only the refused are kept)

    def take_oldest() -> None:
        line = pending.popleft().result()
        if line is not None:
            refused.append(line)
    try:  # a first run decodes each mask here (OpenCV, without the GIL); the refusals come in dataset order
        for item, truth in truths:
            pending.append(pool.submit(truth_refusal, dataset, item, truth, counts))
            if len(pending) > 2 * workers:
                take_oldest()
        while pending:
            take_oldest()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if refused:
        raise Refusals(refused, "truth masks")
    return rule
