"""`profile_pipeline`: the operator profile of a pipeline's model on dataset images, on this CPU."""

from __future__ import annotations

from pathlib import Path

from ..backends.embedded import EmbeddedStream, open_session
from ..dataset import Dataset
from ..errors import SegScopeError
from ..fileio import DEFAULT_MAX_PIXELS, read_bytes
from ..pipeline import load_pipeline
from .machine import MachinePeak, measure_peak
from .model import Profile
from .ort_profile import profile_session


def profile_pipeline(pipeline: Path, dataset: Path, images: int = 4, peak: MachinePeak | None = None,
                     max_pixels: int = DEFAULT_MAX_PIXELS) -> Profile:
    """Profile the model the pipeline's card names over the first `images` images (their stored ROIs)."""
    if images < 1:
        raise SegScopeError(f"--images must be at least 1, got {images}")
    stream = EmbeddedStream(load_pipeline(pipeline))
    data = Dataset.open(dataset, max_pixels=max_pixels)
    items = data.items[:images]
    if not items:
        raise SegScopeError(f"{dataset}: no images to profile (write the demo with: segscope demo {dataset})")
    feeds = []
    for item in items:
        source = str(item.image_path)
        decoded = stream.decode(read_bytes(item.image_path), source, max_pixels)
        crop, _ = stream.crop(decoded, data.roi_for(item, stream.size(decoded)), source)
        resized, _ = stream.resize(crop)
        feeds.append({stream.card.input_name: stream.to_tensor(stream.model_image(resized), source)})
    options = open_session(stream.card).get_session_options()  # the embedded backend's exact settings
    measured = peak or measure_peak()
    assert stream.card.onnx is not None  # open_session checked it
    return profile_session(stream.card.onnx, options, feeds, measured, device=measured.cpu)
