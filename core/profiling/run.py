"""`profile_pipeline`: the operator profile of a pipeline's model on dataset images, on this CPU."""

from __future__ import annotations

from pathlib import Path

from ..backends.embedded import EmbeddedBackend
from ..dataset import Dataset
from ..errors import SegScopeError
from ..fileio import DEFAULT_MAX_PIXELS
from .machine import MachinePeak, measure_peak
from .model import Profile
from .ort_profile import profile_session


def profile_pipeline(pipeline: Path, dataset: Path, images: int = 4, peak: MachinePeak | None = None,
                     max_pixels: int = DEFAULT_MAX_PIXELS) -> Profile:
    """Profile the model the pipeline's card names over the first `images` images (their stored ROIs)."""
    if images < 1:
        raise SegScopeError(f"--images must be at least 1, got {images}")
    data = Dataset.open(dataset, max_pixels=max_pixels)
    items = data.items[:images]
    if not items:
        raise SegScopeError(f"{dataset}: no images to profile (write the demo with: segscope demo {dataset})")
    # The embedded backend prepares each input exactly as its stream does; its session's settings are the ones
    # the profiling session copies.
    with EmbeddedBackend(pipeline, max_pixels=max_pixels) as backend:
        card, session = backend.stream.card, backend.session
        assert session is not None and card.onnx is not None  # open until the block ends; open_session checked it
        feeds = [{card.input_name: backend.prepare(item.image_path, data.roi_for(item)).tensor} for item in items]
        options = session.get_session_options()
    measured = peak or measure_peak()
    return profile_session(card.onnx, options, feeds, measured, device=measured.cpu)
