"""What a stream is sent for an image and an ROI: one rule for `segscope eval`, its precision check and the
viewer's runs (tiles are regions of their own; the remote backend sends what this gives it).

- A stream that crops SegScope's ROI (an `mxpi_imagecrop` on ExternalObjects on its way to the model) is sent the
  image and the ROI: the ROI the user picked (`--roi`, the viewer's, one stored for the image), else the
  dataset's default (the original script's 2200,1000,4000,2800 where it fits, else the whole image).
- A stream without such a crop resizes the whole image it gets, as MindX does: without an ROI of the user's
  it is sent the whole image; with one, SegScope crops the ROI before the stream and sends the crop, and the
  result says so (`PRE_CROP_NOTE`: the line, the JSON and the export's provenance carry it).
- Where a region read gives the stream's decoder its pixels (an opencv decoder, a 3-channel model), the crop's
  box is read from a tiled or pyramidal slide region by region, as the viewer reads it, instead of decoding
  the whole file; `max_pixels` then applies to the region read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..backends.base import InferenceRequest
from ..card.reader import load_model_card
from ..errors import SegScopeError
from ..files.fileio import DEFAULT_MAX_PIXELS
from ..roi import Roi
from ..slides import SlideReader, open_slide, slide_kind_for
from ..slides.requests import region_request
from . import imaging
from .emulation import NO_EXPAND, NotEmulated, data_path, stream_crop
from .loader import load_pipeline
from .pipeline import Pipeline

#: Said of a result whose ROI SegScope cropped before a stream that has no crop of its own.
PRE_CROP_NOTE = "ROI cropped before the stream (the pipeline has no crop)"

#: A request for an ROI of an image whose slide is already open (the viewer's shown slide).
RegionSource = Callable[[Roi], InferenceRequest]


@dataclass(frozen=True)
class StreamInput:
    """The facts of a driven stream the rule needs: its crop (None: none) with the crop's expand ratios, and
    whether a region read gives its decoder's pixels."""

    pipeline: Path
    crop: str | None
    expand: tuple[float, float, float, float] = NO_EXPAND
    region_reads: bool = False

    @classmethod
    def of(cls, pipeline: Pipeline | Path) -> StreamInput:
        loaded = pipeline if isinstance(pipeline, Pipeline) else load_pipeline(pipeline)
        try:
            crop = stream_crop(loaded)
            name, expand = (crop.name, crop.expand) if crop else (None, NO_EXPAND)
            path = data_path(loaded)
        except (NotEmulated, SegScopeError):  # MindX may still run it: a crop on the way counts
            path = loaded.stream.driven_path
            name = next((e.name for e in path if e.factory == "mxpi_imagecrop"), None)
            expand = NO_EXPAND
        decoder = next((e for e in path if e.factory == "mxpi_imagedecoder"), None)
        return cls(loaded.path, name, expand, decoder is not None and imaging.processor(decoder.props) == "opencv"
                   and _three_channels(loaded))

    def region_source(self, reader: SlideReader) -> RegionSource | None:
        """Requests for ROIs of the slide `reader` has open, read as regions (None where the stream's decode needs
        the file: a region read would not give its decoder's pixels)."""
        if not self.region_reads:
            return None
        return lambda roi: region_request(reader, roi, self.expand)

    def describe(self) -> str:
        """The rule for this stream, in one line (`segscope check`)."""
        if self.crop:
            return (f"ROI: {self.crop} crops it (without --roi or a picked ROI: the dataset's default ROI where it "
                    "fits, else the whole image)")
        return ("ROI: the stream has no mxpi_imagecrop, so without --roi it resizes the whole image (as on MindX); "
                "with --roi or in the viewer SegScope crops the ROI before the stream")

    def request(self, image: Path, picked: Roi | None, default: Callable[[], Roi], max_pixels: int = DEFAULT_MAX_PIXELS,
                source: RegionSource | None = None) -> InferenceRequest:
        """The request for `image`: `picked` is the user's ROI (None: none), `default()` the dataset's for
        it; `source` reads an ROI from the slide already open, where there is one."""
        if self.crop is None and picked is None:
            return InferenceRequest(image, None)  # the whole image, as MindX resizes it
        roi = picked or default()
        if self.crop is None:
            return self._pre_cropped(image, roi, max_pixels, source)
        if source is not None:
            return source(roi)
        if self.region_reads and slide_kind_for(image).name != "opencv":  # tiled/pyramidal: read the region only
            return self._region(image, roi, self.expand, max_pixels)
        return InferenceRequest(image, roi)

    def _pre_cropped(self, image: Path, roi: Roi, max_pixels: int, source: RegionSource | None) -> InferenceRequest:
        if not self.region_reads:
            raise SegScopeError(f"{self.pipeline}: the stream has no mxpi_imagecrop and its decoder is not an opencv "
                                "one whose pixels SegScope can crop before it (DVPP, or a 4-channel model): run it "
                                "without an ROI (the whole image, as on MindX) or add a crop to the stream")
        request = source(roi) if source is not None else self._region(image, roi, NO_EXPAND, max_pixels)
        assert request.placement is not None
        return replace(request, placement=replace(request.placement, note=PRE_CROP_NOTE))

    @staticmethod
    def _region(image: Path, roi: Roi, expand: tuple[float, float, float, float], max_pixels: int
                ) -> InferenceRequest:
        """The crop's box read from the slide, checked against `max_pixels` (what is decoded)."""
        with open_slide(image, max_pixels) as reader:
            box = imaging.crop_box(roi, expand, *reader.size)
            if box.width * box.height > max_pixels:
                raise SegScopeError(f"{image}: the region {box} is {box.width}x{box.height} = "
                                    f"{box.width * box.height:,} pixels, more than the limit {max_pixels:,}: pick a "
                                    "smaller ROI or raise --max-pixels")
            return region_request(reader, roi, expand)


#: The rule for a caller that names no pipeline: a stream that crops the ROI itself, sent the file.
CROPS_ROI = StreamInput(Path("<a stream with a crop>"), "mxpi_imagecrop")


def _three_channels(pipeline: Pipeline) -> bool:
    """A region read gives BGR: not the 4th channel a 4-channel model reads from the file."""
    try:
        return load_model_card(pipeline.model_path(), check_graph=False, warn=False).preprocess.channels != 4
    except SegScopeError:
        return False
