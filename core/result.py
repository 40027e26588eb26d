"""What one run of the stream gives back, whichever backend ran it (embedded, MindX, remote).

Everything downstream (metrics, review, export, the session, the viewer) works on `InferenceResult`; it
lives here rather than beside the backends so those modules need nothing from `core.backends`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

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
    argmax: np.ndarray  # H x W uint8 class index
    roi: Roi
    image_size: tuple[int, int]
    timings: dict[str, float] = field(default_factory=dict)  # stage -> seconds, see STAGES
    backend: str = ""

    @property
    def num_classes(self) -> int:
        return int(self.probabilities.shape[-1])


@dataclass(frozen=True)
class Placement:
    """Where an image sent through the stream lies in a larger slide: `box` in slide pixels and the slide's
    (width, height). A result on that image maps back by `place` (the ROI crop upload, region reads)."""

    box: Roi
    slide_size: tuple[int, int]

    def to_slide(self, roi: Roi) -> Roi:
        """A box in the sent image's pixels (as the stream reports it) in the slide's pixels."""
        x, y = self.box.x0, self.box.y0
        return Roi(roi.x0 + x, roi.y0 + y, roi.x1 + x, roi.y1 + y)

    def place(self, result: InferenceResult) -> InferenceResult:
        """`result` with its ROI and image size in slide pixels."""
        return replace(result, roi=self.to_slide(result.roi), image_size=self.slide_size)
