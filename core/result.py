"""What one run of the stream gives back, whichever backend ran it (embedded, MindX, remote).

Everything downstream (metrics, review, export, the session, the viewer) works on `InferenceResult`; it
lives here rather than beside the backends so those modules need nothing from `core.backends`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .files.stamp import Stamp
from .roi import Roi

#: Stage names in stream order; backends report the ones they measure, in seconds. "device" is the NPU's own
#: time for the model where the API reports it (ais_bench); "infer" is then the rest of the model call.
STAGES = ("upload", "decode", "crop", "resize", "preprocess", "infer", "device", "postprocess", "download")


@dataclass
class InferenceResult:
    """One image's stream output.

    `probabilities` and `argmax` are at model resolution (the resize plugin's output, e.g. 960x960);
    `roi` is the box actually cropped, in slide pixels, and `image_size` the decoded slide's (width, height).
    """

    probabilities: np.ndarray  # H x W x C float32, softmax over classes
    argmax: np.ndarray  # H x W uint8 class index: `decide(probabilities, threshold)` at model resolution
    roi: Roi
    image_size: tuple[int, int]
    timings: dict[str, float] = field(default_factory=dict)  # stage -> seconds, see STAGES
    backend: str = ""
    #: The card's rule for two classes from a 1-channel output: class 1 where p1 > threshold (None: argmax).
    threshold: float | None = None
    #: How the ROI reached the stream when not by the stream's own crop (core.stream.input.PRE_CROP_NOTE), else "".
    roi_note: str = ""
    #: The image file as it was when the run read it (taken just before: a change meanwhile reads as a change),
    #: None where unknown; a result whose image changed since is stale (`core.session.answers.IMAGE_CHANGED`).
    image: Stamp | None = None

    @property
    def num_classes(self) -> int:
        return int(self.probabilities.shape[-1])


def decision_map(probabilities: np.ndarray, threshold: float | None) -> tuple[np.ndarray, float] | None:
    """For two classes, the one map and cut that decide them (class 1 where map > cut): p1 and the card's
    threshold, or p1 − p0 and 0 for the argmax (what a linear resize of both maps gives, resized once); None
    for more classes."""
    if probabilities.shape[-1] != 2:
        return None
    if threshold is not None:
        return probabilities[..., 1], threshold
    return probabilities[..., 1] - probabilities[..., 0], 0.0


def decide(probabilities: np.ndarray, threshold: float | None) -> np.ndarray:
    """The predicted class per pixel of H x W x C probabilities by the card's rule: class 1 where p1 > threshold
    (two classes from a 1-channel output), else the most probable class (ties: the lower one). Every mask
    SegScope shows, scores or exports comes from this, on the probabilities at the mask's own grid."""
    two = decision_map(probabilities, threshold)
    if two is None:
        return probabilities.argmax(axis=-1).astype(np.uint8)
    scores, cut = two
    return (scores > cut).astype(np.uint8)


@dataclass(frozen=True)
class Placement:
    """Where an image sent through the stream lies in a larger slide: `box` in slide pixels and the slide's
    (width, height). A result on that image maps back by `place` (the ROI crop upload, region reads)."""

    box: Roi
    slide_size: tuple[int, int]
    note: str = ""  # said of the result (`InferenceResult.roi_note`), e.g. that SegScope cropped the ROI

    def to_slide(self, roi: Roi) -> Roi:
        """A box in the sent image's pixels (as the stream reports it) in the slide's pixels."""
        x, y = self.box.x0, self.box.y0
        return Roi(roi.x0 + x, roi.y0 + y, roi.x1 + x, roi.y1 + y)

    def place(self, result: InferenceResult) -> InferenceResult:
        """`result` with its ROI and image size in slide pixels."""
        return replace(result, roi=self.to_slide(result.roi), image_size=self.slide_size,
                       roi_note=self.note or result.roi_note)
