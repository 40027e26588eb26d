"""What a run can check before its first image, from file headers alone (nothing is decoded): every image's
size and every ground-truth mask's size against its image's. A run that would stop at image 2 on a mask of
the wrong size stops before image 1 instead, having printed and exported nothing."""

from __future__ import annotations

from ..metrics.scores import check_sizes
from ..slides import slide_size
from .dataset import Dataset


def check_sizes_up_front(dataset: Dataset) -> None:
    """Raise, in one line naming the file, at the first image whose header cannot be read or whose mask is
    not the image's size."""
    for item in dataset.items:
        size = dataset.image_size(item)
        truth = item.truth_path
        if truth is not None:
            check_sizes(slide_size(truth, dataset.max_pixels), size, str(truth))
