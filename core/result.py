"""What one run of the stream gives back, whichever backend ran it (embedded, MindX, remote).

Everything downstream (metrics, review, export, the session, the viewer) works on `InferenceResult`; it
lives here rather than beside the backends so those modules need nothing from `core.backends`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .roi import Roi

#: Stage names in stream order; backends report the ones they measure, in seconds.
STAGES = ("upload", "decode", "crop", "resize", "preprocess", "infer", "postprocess", "download")


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
