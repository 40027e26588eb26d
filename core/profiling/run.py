"""`profile_pipeline`: the operator profile of a pipeline's model on dataset images, on this CPU;
`profile_backend`: the model's time per inference through another backend (an Ascend API: the NPU's own time
where it reports one)."""

from __future__ import annotations

from pathlib import Path

from ..backend_spec import BackendSpec, open_backend
from ..backends.base import InferenceRequest
from ..backends.embedded import EmbeddedBackend
from ..dataset.dataset import Dataset, DatasetItem
from ..errors import SegScopeError
from ..files.fileio import DEFAULT_MAX_PIXELS
from .machine import MachinePeak, measure_peak
from .model import Profile, mean_p95
from .ort_profile import profile_session


def profile_pipeline(pipeline: Path, dataset: Path, images: int = 4, peak: MachinePeak | None = None,
                     max_pixels: int = DEFAULT_MAX_PIXELS) -> Profile:
    """Profile the model the pipeline's card names over the first `images` images (their stored ROIs)."""
    data, items = _first_items(dataset, images, max_pixels)
    # The embedded backend prepares each input exactly as its stream does; its session's settings are the ones
    # the profiling session copies.
    with EmbeddedBackend(pipeline, max_pixels=max_pixels) as backend:
        card, session = backend.stream.card, backend.session
        assert session is not None and card.onnx is not None  # open until the block ends; open_session checked it
        feeds = [{card.input_name: backend.prepare(item.image_path, data.roi_for(item)).tensor} for item in items]
        options = session.get_session_options()
    measured = peak or measure_peak()
    return profile_session(card.onnx, options, feeds, measured, device=measured.cpu)


def _first_items(dataset: Path, images: int, max_pixels: int) -> tuple[Dataset, list[DatasetItem]]:
    if images < 1:
        raise SegScopeError(f"--images must be at least 1, got {images}")
    data = Dataset.open(dataset, max_pixels=max_pixels)
    items = data.items[:images]
    if not items:
        raise SegScopeError(f"{dataset}: no images to profile (write the demo with: segscope demo {dataset})")
    return data, items


def profile_backend(kind: str, source: Path, dataset: Path, images: int = 4, sdk_home: Path | None = None,
                    max_pixels: int = DEFAULT_MAX_PIXELS) -> Profile:
    """The model's time per inference through backend `kind` over the first `images` images, after one warm-up
    run: its "device" stage (the NPU's own time, ais_bench) where every run reports one, else "infer" (the
    model call on the host clock, copies included). No per-operator table: the APIs report none."""
    data, items = _first_items(dataset, images, max_pixels)
    requests = [InferenceRequest(item.image_path, data.roi_for(item)) for item in items]
    with open_backend(BackendSpec(kind, source, max_pixels=max_pixels, sdk_home=sdk_home)) as backend:
        backend.infer(requests[0].image, requests[0].roi)
        results = list(backend.infer_many(requests))
        capabilities = backend.capabilities
    stage = "device" if all("device" in r.timings for r in results) else "infer"
    times = [r.timings[stage] * 1000 for r in results]
    mean, p95 = mean_p95(times)
    summary = {f"{stage}.mean_ms": mean, f"{stage}.p95_ms": p95, f"{stage}.min_ms": min(times),
               f"{stage}.max_ms": max(times)}
    if stage == "device":  # the rest of the model call: copies to and from the chip, host overhead
        summary["infer_besides_device.mean_ms"] = mean_p95([r.timings["infer"] * 1000 for r in results])[0]
    what = "NPU time per inference" if stage == "device" else "model call per inference, host clock"
    return Profile(capabilities.details.get("model", str(source)), f"{capabilities.name} ({what})",
                   capabilities.device, mean, len(times), (), summary=summary)
