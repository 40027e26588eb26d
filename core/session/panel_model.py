"""What the viewer's result panels show of a result besides its arrays, without Qt: their titles in the model
card's terms, and the ROI image and ground truth checked against the result's ROI (made on any thread)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..card.reader import ModelCard, load_model_card
from ..errors import SegScopeError
from ..metrics.scores import mask_to_labels
from ..result import InferenceResult
from ..roi import Roi
from ..slides.base import SlideReader
from ..stream.loader import load_pipeline


@dataclass(frozen=True)
class PanelTitles:
    """What the first two panels show, in the card's terms: a softmax model's per-class probabilities and
    argmax, or a thresholded model's probability map and mask."""

    heat: str = "Softmax"
    labels: str = "Argmax"


def card_titles(card: ModelCard) -> PanelTitles:
    """The titles for a card: "Probability" and "Mask (p > t)" (the card's rule, `core.result.decide`; "raw > t"
    when it thresholds the raw output) when its score output is one channel turned into a mask by a threshold
    (a sigmoid or probability map), else "Softmax"/"Probability" and "Argmax"."""
    index = card.probability_index()
    spec = card.outputs[index]
    dims = card.graph.outputs[index].dims if card.graph is not None and index < len(card.graph.outputs) else None
    channel = (dims[1] if spec.layout == "NCHW" else dims[-1]) if dims is not None and len(dims) == 4 else None
    one_channel = channel == 1 or (channel is None and len(card.class_names) == 2 and
                                   (spec.threshold is not None or spec.activation == "sigmoid"))
    if one_channel:
        threshold = 0.5 if spec.threshold is None else spec.threshold
        value = "raw" if spec.threshold_on == "raw" else "p"
        return PanelTitles("Probability", f"Mask ({value} > {threshold:g})")
    return PanelTitles("Softmax" if spec.activation in ("softmax", "none") else "Probability", "Argmax")


@dataclass(frozen=True)
class PanelInputs:
    """What the panels draw of one result besides its arrays, made on any thread (`panel_inputs`): the ROI
    image, the ground truth as class ids at ROI resolution, the names of the classes of the model that made
    it, and a problem with the mask (it is then left out)."""

    result: InferenceResult
    roi_image: np.ndarray | None
    truth: np.ndarray | None
    class_names: tuple[str, ...] = ()
    problem: str = ""


#: An image previewed before its first run is read at the coarsest level of its slide that still gives the ROI this
#: many pixels on its longer side (the panels draw it at screen size): a large ROI of a pyramidal slide is never
#: read at full resolution for it.
PREVIEW_SIDE = 512


@dataclass(frozen=True)
class PreviewInputs:
    """What the panels draw of an image before anything answers for it (never run): the ROI image (at a level of
    the slide near `PREVIEW_SIDE`, drawn over the ROI; None where it cannot be read: the slide view says why) and
    the ground truth under the ROI as class ids (None: no mask, or one that does not fit, `problem` naming why)."""

    roi: Roi
    roi_image: np.ndarray | None
    truth: np.ndarray | None
    problem: str = ""


def _labels(roi: Roi, gt_roi: np.ndarray | None, num_classes: int) -> tuple[np.ndarray | None, str]:
    """The mask under `roi` as the class ids of a `num_classes` model: (labels, "") or (None, why it does not fit)."""
    try:
        if gt_roi is not None and gt_roi.shape[:2] != (roi.height, roi.width):
            raise SegScopeError(f"ground-truth mask crop is {gt_roi.shape[1]}x{gt_roi.shape[0]} but the ROI {roi} is "
                                f"{roi.width}x{roi.height}: the mask must have the image's size")
        return (None if gt_roi is None else mask_to_labels(gt_roi, num_classes)), ""  # may refuse the mask
    except SegScopeError as exc:
        return None, str(exc)


def panel_inputs(result: InferenceResult, roi_image_bgr: np.ndarray | None, gt_roi: np.ndarray | None,
                 class_names: Sequence[str] = ()) -> PanelInputs:
    """`roi_image_bgr` and `gt_roi` (ROI crops at ROI resolution) checked and the mask read as class ids;
    numpy only, so a window makes them on a worker. A ground truth that does not fit is left out, named."""
    roi = result.roi
    if roi_image_bgr is not None and roi_image_bgr.shape[:2] != (roi.height, roi.width):
        raise SegScopeError(f"ROI image crop is {roi_image_bgr.shape[1]}x{roi_image_bgr.shape[0]} but the ROI {roi} "
                            f"is {roi.width}x{roi.height}: crop the slide with the result's ROI")
    truth, problem = _labels(roi, gt_roi, result.num_classes)
    return PanelInputs(result, roi_image_bgr, truth, tuple(class_names), problem)


def preview_inputs(reader: SlideReader | None, roi: Roi, gt_roi: np.ndarray | None, num_classes: int) -> PreviewInputs:
    """What the panels draw of an image no result answers for: its ROI read from `reader` near `PREVIEW_SIDE`
    pixels, the mask under the ROI read as the class ids of the open model's `num_classes` (reads: any thread)."""
    truth, problem = _labels(roi, gt_roi, num_classes)
    return PreviewInputs(roi, _preview_image(reader, roi), truth, problem)


def _preview_image(reader: SlideReader | None, roi: Roi) -> np.ndarray | None:
    """The ROI's pixels (BGR) from the coarsest level that gives it `PREVIEW_SIDE` pixels on its longer side; None
    where the slide cannot give them (not open, the ROI outside it, a damaged file: the slide view says so)."""
    if reader is None or not roi.fits(*reader.size):
        return None
    level = reader.level_for(max(roi.width, roi.height) / PREVIEW_SIDE)
    box = reader.levels[level]
    x0, y0 = int(roi.x0 / box.downsample), int(roi.y0 / box.downsample)
    x1 = min(max(math.ceil(roi.x1 / box.downsample), x0 + 1), box.width)
    y1 = min(max(math.ceil(roi.y1 / box.downsample), y0 + 1), box.height)
    try:
        return reader.read_region(level, x0, y0, x1 - x0, y1 - y0)
    except SegScopeError:
        return None


def pipeline_titles(pipeline: Path) -> PanelTitles:
    """`card_titles` of the card a pipeline's model has (reads files: call it off the GUI thread)."""
    return card_titles(load_model_card(load_pipeline(pipeline).model_path(), warn=False))
