"""CPU emulation of the MindX plugins a segmentation stream runs around its model, and the check of what the
embedded backend can emulate.

Each plugin's emulation cites the VisionSDK source or document it follows. The stream's structure is read
by `plan_stream` once; the backend then runs the stages on arrays.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, Union

import numpy as np

from ..errors import SegScopeError
from ..files.fileio import read_text
from . import imaging
from .pipeline import Element, Pipeline, Stream

#: Elements that forward their buffer unchanged: GStreamer tee/queue, mxpi_dataserialize (it only turns
#: metadata into JSON, VisionSDK MxpiDataSerialize.cpp) and mxpi_dumpdata (MxpiDumpData.cpp).
PASS_THROUGH = frozenset({"appsrc", "appsink", "tee", "queue", "mxpi_dataserialize", "mxpi_dumpdata"})
EMULATED = PASS_THROUGH | {"mxpi_imagedecoder", "mxpi_imagecrop", "mxpi_imageresize", "mxpi_imagenormalize",
                           "mxpi_tensorinfer", "mxpi_modelinfer", "mxpi_semanticsegpostprocessor"}
#: The SDK's semantic segmentation post-processing libraries and their config defaults (VisionSDK
#: docs/zh/appendix.md, tables 14-21: deeplabv3.cfg, unet_simple.cfg).
SEGMENTATION_LIBS = {
    "libdeeplabv3post.so": {"CLASS_NUM": "21", "MODEL_TYPE": "1", "POST_TYPE": "0"},
    "libunetmindsporepostprocess.so": {"CLASS_NUM": "2", "MODEL_TYPE": "0", "POST_TYPE": "1"},
}


@dataclass(frozen=True)
class Decoder:
    """mxpi_imagedecoder (MxpiImageDecoder.cpp): opencv gives `outputDataFormat` BGR|RGB of `dataType`
    uint8|float32; ascend (DVPP, the default) gives NV12 (core.stream.dvpp)."""

    rgb: bool = False
    float32: bool = False
    dvpp: bool = False


@dataclass(frozen=True)
class Normalize:
    """mxpi_imagenormalize (MxpiImageNormalize.cpp Normalize): per channel `(x - alpha) / beta` with
    alpha/beta given as R,G,B (swapped for a BGR image), converted to `dataType` (auto = the input's) with
    OpenCV's saturation, then to `format` (auto = the input's)."""

    alpha: tuple[float, float, float] = (0.0, 0.0, 0.0)
    beta: tuple[float, float, float] = (1.0, 1.0, 1.0)
    data_type: str = "auto"
    output_format: str = "auto"

    @classmethod
    def from_props(cls, props: dict[str, str], where: str) -> Normalize:
        if props.get("processType", "1").strip() != "1":
            raise SegScopeError(f"{where}: processType {props['processType']!r} (min-max normalisation) is not "
                                "emulated by the embedded backend; only 1 (standardisation) is")

        def triple(key: str, default: str) -> tuple[float, float, float]:
            parts = [p for p in props.get(key, default).replace(" ", "").split(",") if p]
            try:
                values = tuple(float(p) for p in parts)
            except ValueError:
                values = ()
            if len(values) != 3:
                raise SegScopeError(f"{where}: {key} must be three numbers 'R,G,B', got {props[key]!r}")
            return values  # type: ignore[return-value]

        beta = triple("beta", "1,1,1")
        if 0.0 in beta:
            raise SegScopeError(f"{where}: beta must not be 0 (the plugin refuses it)")
        data_type, output_format = props.get("dataType", "auto"), props.get("format", "auto")
        if data_type not in ("auto", "UINT8", "FLOAT32") or output_format not in ("auto", "RGB888", "BGR888"):
            raise SegScopeError(f"{where}: dataType must be auto|UINT8|FLOAT32 and format auto|RGB888|BGR888")
        return cls(triple("alpha", "0,0,0"), beta, data_type, output_format)

    def output_rgb(self, rgb: bool) -> bool:
        """Whether the output is RGB, for an input that is RGB when `rgb` (`format` auto keeps the input's)."""
        return rgb if self.output_format == "auto" else self.output_format == "RGB888"

    def apply(self, image: np.ndarray, rgb: bool) -> np.ndarray:
        """`image` H x W x 3 (RGB when `rgb`, else BGR), uint8 or float32 (the plugin takes only these) -> the
        normalised image in the output format (`output_rgb`)."""
        order = slice(None) if rgb else slice(None, None, -1)
        alpha, beta = np.asarray(self.alpha)[order], np.asarray(self.beta)[order]
        to_u8 = self.data_type == "UINT8" or (self.data_type == "auto" and image.dtype == np.uint8)
        # cv::Mat::convertTo(type, 1/std, -mean/std) per channel: float math, saturate + round for uint8.
        planes = [image[..., i].astype(np.float32) * np.float32(1 / beta[i]) + np.float32(-alpha[i] / beta[i])
                  for i in range(3)]
        out = np.stack(planes, axis=-1)
        out = np.clip(np.rint(out), 0, 255).astype(np.uint8) if to_u8 else out
        if self.output_rgb(rgb) != rgb:
            out = np.ascontiguousarray(out[..., ::-1])
        return out


def read_config(path: Path, where: str) -> dict[str, str]:
    """A post-processing config (`KEY=VALUE` lines, `#` comments), as MxBase ConfigUtil reads it."""
    try:
        text = read_text(path, "post-processing config")
    except SegScopeError as exc:
        raise SegScopeError(f"{where}: postProcessConfigPath {exc}") from None
    config = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = line.split("=", 1)
            config[key.strip()] = value.strip()
    return config


@dataclass(frozen=True)
class SemanticSeg:
    """mxpi_semanticsegpostprocessor / a segmentation `mxpi_modelinfer` post-processor.

    From VisionSDK docs/zh/appendix.md (deeplabv3.cfg, unet_simple.cfg) and SemanticSegPostProcessBase.cpp:
    `CLASS_NUM` classes; `MODEL_TYPE` 0 = NHWC logits, 1 = NCHW; `POST_TYPE` 1 = the model's output is
    already an N x H x W argmax (passed through); defaults per library. The class map is then resized back
    to the crop with nearest neighbour `src[y * h / H][x * w / W]` (integers), where (w, h) is the content's size in the
    model input for the keep-aspect resizers (`RESIZE_TYPE` 0 = no resize back).
    """

    class_num: int = 21
    nchw: bool = True
    argmax_input: bool = False
    resize_back: bool = True

    @classmethod
    def from_element(cls, element: Element, pipeline: Pipeline, where: str) -> SemanticSeg:
        library = Path(element.props.get("postProcessLibPath", "")).name
        if library not in SEGMENTATION_LIBS:
            raise SegScopeError(f"{where}: post-processing library {library or '(none)'!r} is not one SegScope "
                                f"emulates ({', '.join(SEGMENTATION_LIBS)})")
        config = dict(SEGMENTATION_LIBS[library])
        if element.props.get("postProcessConfigPath"):
            config.update(read_config(pipeline.resolve(element.props["postProcessConfigPath"]), where))
        if element.props.get("postProcessConfigContent"):
            config.update(_content(element.props["postProcessConfigContent"]))
        try:
            return cls(int(config["CLASS_NUM"]), config["MODEL_TYPE"] != "0", config["POST_TYPE"] == "1",
                       config.get("RESIZE_TYPE", "1") != "0")
        except ValueError:
            raise SegScopeError(f"{where}: CLASS_NUM must be an integer, got {config['CLASS_NUM']!r}") from None

    def class_map(self, tensor: np.ndarray) -> np.ndarray:
        """The model's first output tensor -> H x W class indices (uint8)."""
        array = np.asarray(tensor)
        dims = 2 if self.argmax_input else 3
        if array.ndim < dims or array.size != int(np.prod(array.shape[-dims:])):
            wanted = "an N x H x W argmax" if self.argmax_input else \
                f"N x {'C x H x W' if self.nchw else 'H x W x C'} scores"
            raise SegScopeError(f"the model's first output has shape {list(array.shape)} but the post-process "
                                f"config expects {wanted} (check POST_TYPE and MODEL_TYPE)")
        if self.argmax_input:
            return array.reshape(array.shape[-2:]).astype(np.uint8)
        array = array.reshape(array.shape[-3:])
        classes = int(array.shape[0 if self.nchw else 2])
        if classes != self.class_num:
            raise SegScopeError(f"the model gives {classes} classes but the post-process config's CLASS_NUM is "
                                f"{self.class_num}: fix CLASS_NUM (or MODEL_TYPE, 0 = NHWC, 1 = NCHW)")
        return array.argmax(axis=0 if self.nchw else -1).astype(np.uint8)

    def to_crop(self, classes: np.ndarray, crop_size: tuple[int, int], plan: imaging.ResizePlan,
                keep_aspect: bool) -> np.ndarray:
        """The class map at the crop's size (SemanticSegPostProcessBase::CoordinatesReduction); only after a
        Fit/FastRCNN resize (`keep_aspect`) does the SDK leave the padding out."""
        width, height = crop_size
        if not self.resize_back or classes.shape[::-1] == crop_size:
            return classes
        rh, rw = classes.shape
        if keep_aspect:
            rw, rh = plan.content[2] * rw // plan.output_size[0], plan.content[3] * rh // plan.output_size[1]
        rows = np.arange(height, dtype=np.int64) * rh // height
        cols = np.arange(width, dtype=np.int64) * rw // width
        return classes[rows[:, None], cols[None, :]]


def _content(text: str) -> dict[str, str]:
    """postProcessConfigContent: a JSON object (kept as text by the loader) or KEY=VALUE text."""
    pairs = re.findall(r'"?(\w+)"?\s*[:=]\s*"?([^",}\n]*)"?', text)
    return {k: v.strip() for k, v in pairs}


class NotEmulated(SegScopeError):
    """The stream is valid for MindX but the embedded backend cannot emulate it; `reason` says why."""

    def __init__(self, pipeline: Pipeline, reason: str):
        super().__init__(f"{pipeline.path}: embedded backend cannot run it ({reason}; still valid for MindX: "
                         "run it on the Ascend host)")
        self.reason = reason


@dataclass(frozen=True)
class Crop:
    """mxpi_imagecrop on SegScope's ROI (dataSource ExternalObjects): its expand ratios (left, right, up, down)."""

    name: str
    expand: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


#: One element that changes the image on its way to the model, run in the stream's order.
Stage = Union[Crop, imaging.ResizeSpec, Normalize]  # noqa: UP007 (a run-time alias: Python 3.9 has no X | Y)
NO_EXPAND = (0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class StreamPlan:
    """What the embedded backend runs for the driven stream: the decoder, then the elements whose output
    reaches the model (`data_path`) in the stream's order, the model, and its post-processing."""

    decoder: Decoder
    stages: tuple[Stage, ...]  # a crop's own resize follows it as a ResizeSpec
    model: Element
    segmentation: SemanticSeg | None

    @property
    def crop(self) -> Crop | None:
        return next((s for s in self.stages if isinstance(s, Crop)), None)

    @property
    def expand(self) -> tuple[float, float, float, float]:
        return self.crop.expand if self.crop else NO_EXPAND

    @property
    def resizes(self) -> tuple[imaging.ResizeSpec, ...]:
        """The resizes, in order (all after the crop, if there is one): they place the crop in the output."""
        return tuple(s for s in self.stages if isinstance(s, imaging.ResizeSpec))


StageT = TypeVar("StageT", bound=Stage)


def sized(stages: tuple[StageT, ...], input_size: tuple[int, int]) -> tuple[StageT, ...]:
    """The stages with an unset resize size taken from the model input (MxpiImageResize.cpp dynamic sizes)."""
    return tuple(s.with_size(input_size) if isinstance(s, imaging.ResizeSpec) and s.needs_size  # type: ignore[misc]
                 else s for s in stages)


def _ratio(element: Element, key: str, where: str) -> float:
    try:
        value = float(element.props.get(key, "0"))
    except ValueError:
        raise SegScopeError(f"{where}: {key} must be a number in 0..1, got {element.props[key]!r}") from None
    if not 0.0 <= value <= 1.0:
        raise SegScopeError(f"{where}: {key} must be in 0..1 (the plugin's range), got {value:g}")
    return value


def _image_source(element: Element) -> str:
    """The metadata key an element reads its image from ("auto": its upstream element's): mxpi_imagecrop's
    `dataSourceImage` (its `dataSource` names the boxes), everyone else's `dataSource`
    (MxpiPluginsUtils.cpp MxPluginsAutoDataSource)."""
    key = "dataSourceImage" if element.factory == "mxpi_imagecrop" else "dataSource"
    return element.props.get(key, "auto").strip() or "auto"


def data_path(pipeline: Pipeline) -> tuple[Element, ...]:
    """The driven stream's elements whose output reaches its model, in order, from the decoder (or the
    input) to the model: each element reads the image its dataSource names, the upstream element's by
    default, so an element that the next one's dataSource skips changes nothing the model gets. Pass-through
    elements (queues, tees) add no metadata: "auto" looks through them. NotEmulated when a dataSource names no
    element before it."""
    stream = pipeline.stream
    path = stream.driven_path
    model = stream.model_element
    if model is None or model not in path:
        return path
    position = {e.name: i for i, e in enumerate(path)}
    chain = [model]
    current = model
    while current.factory not in ("mxpi_imagedecoder", "appsrc"):
        index = position[current.name]
        key = _image_source(current)
        if key == "auto":
            upstream = [e for e in path[:index] if e.factory not in PASS_THROUGH or e.factory == "appsrc"]
            if not upstream:
                break
            current = upstream[-1]
        elif key in position and position[key] < index:
            current = path[position[key]]
        else:
            raise NotEmulated(pipeline, f"{current.name} ({current.factory}): its dataSource {key!r} is no element "
                                        "before it on the driven path, so SegScope cannot tell what image it gets")
        chain.append(current)
    return tuple(reversed(chain))


def plan_stream(pipeline: Pipeline) -> StreamPlan:
    """Read the driven stream for emulation; `NotEmulated` names the first element it cannot emulate (or whose
    order it cannot reproduce)."""
    stream = pipeline.stream
    problem = drive_problem(stream)
    if problem:
        raise NotEmulated(pipeline, problem)
    model = stream.model_element
    if model is None:
        raise NotEmulated(pipeline, f"stream {stream.name!r} runs no model")
    for element in stream.driven_path:
        if element.factory not in EMULATED:
            raise NotEmulated(pipeline, f"{element.name} ({element.factory}): "
                                        f"{'a custom plugin' if element.custom else 'not emulated'}")
    feeding = {e.name for e in data_path(pipeline)}
    decoder, segmentation = Decoder(), None
    stages: list[Stage] = []
    after_model = False
    for element in stream.driven_path:
        name = f"{element.name} ({element.factory})"  # errors below name the element this way
        try:
            if element is model:
                after_model = True
                segmentation = _model_post(element, pipeline, name)
            elif after_model:
                if element.factory not in PASS_THROUGH | {"mxpi_semanticsegpostprocessor"}:
                    raise NotEmulated(pipeline, f"{name}: not emulated after the model")
                if element.factory == "mxpi_semanticsegpostprocessor":
                    segmentation = SemanticSeg.from_element(element, pipeline, name)
            elif element.factory in PASS_THROUGH or element.name not in feeding:
                continue  # forwards the image, or its output is not what the model reads
            elif element.factory == "mxpi_imagedecoder":
                decoder = _decoder(element, pipeline, name)
            elif element.factory in ("mxpi_imagecrop", "mxpi_imageresize"):
                _check_memory(element, decoder, pipeline, name)
                if element.factory == "mxpi_imagecrop":
                    stages.append(_crop(element, pipeline, name, stages))
                stages.extend(_resize_spec(element, name))
                if decoder.dvpp and stages and isinstance(stages[-1], imaging.ResizeSpec) \
                        and stages[-1].resize_type != "Resizer_Stretch":
                    raise NotEmulated(pipeline, f"{name}: {stages[-1].resize_type} on the DVPP path is not "
                                                "emulated (Resizer_Stretch is)")
            elif element.factory == "mxpi_imagenormalize" and decoder.dvpp:
                raise NotEmulated(pipeline, f"{name}: works on host images, not on DVPP's NV12")
            elif element.factory == "mxpi_imagenormalize":
                stages.append(Normalize.from_props(element.props, name))
            else:  # a second model, or a post-processor before the model
                raise NotEmulated(pipeline, f"{name}: not emulated before the model")
        except NotEmulated:
            raise
        except SegScopeError as exc:
            raise NotEmulated(pipeline, str(exc)) from None
    return StreamPlan(decoder, tuple(stages), model, segmentation)


def _check_memory(element: Element, decoder: Decoder, pipeline: Pipeline, name: str) -> None:
    """DVPP images live in device memory, opencv ones on the host: a crop/resize takes only its own kind (the
    other fails with "Memory type is not ...", MxpiImageCrop.cpp/MxpiImageResize.cpp)."""
    if (imaging.processor(element.props) == "ascend") != decoder.dvpp:
        kind, other = ("opencv", "a DVPP decoder") if decoder.dvpp else ("ascend (DVPP)", "an opencv decoder")
        raise NotEmulated(pipeline, f"{name}: an {kind} {element.factory} after {other} (MindX fails: the image "
                                    "is in the other memory); give the decoder, crop and resize the same "
                                    "cvProcessor")


def _crop(element: Element, pipeline: Pipeline, name: str, before: list[Stage]) -> Crop:
    """mxpi_imagecrop on SegScope's ROI; only where the ROI's slide pixels are the image's: first, or after a
    normalisation (a resize before it would have MindX crop the ROI's coordinates out of the resized image)."""
    if any(isinstance(s, Crop) for s in before):
        raise NotEmulated(pipeline, f"{name}: a second crop of SegScope's ROI is not emulated")
    resized = next((s for s in before if isinstance(s, imaging.ResizeSpec)), None)
    if resized is not None:
        raise NotEmulated(pipeline, f"{name}: crops after a resize ({resized.resize_type}), so MindX would take the "
                                    "ROI's slide coordinates in the resized image: SegScope cannot place that "
                                    "crop on the slide (crop first, then resize)")
    return Crop(element.name, _crop_expand(element, pipeline, name))


def _crop_expand(element: Element, pipeline: Pipeline, name: str) -> tuple[float, float, float, float]:
    """mxpi_imagecrop on SegScope's ROI (dataSource ExternalObjects): its expand ratios (0..1 each)."""
    source = element.props.get("dataSource", "ExternalObjects")
    if element.props.get("autoDetectFrame", "1") != "1" or source != "ExternalObjects":
        raise NotEmulated(pipeline, f"{name}: crops boxes from {source!r}, not SegScope's ROI "
                                    "(dataSource ExternalObjects)")
    return tuple(_ratio(element, f"{side}ExpandRatio", name)  # type: ignore[return-value]
                 for side in ("left", "right", "up", "down"))


def stream_crop(pipeline: Pipeline) -> Crop | None:
    """The crop of SegScope's ROI on the driven stream's way to its model (None: the stream has none, so it
    resizes the whole image it is sent, as MindX does)."""
    crop = next((e for e in data_path(pipeline) if e.factory == "mxpi_imagecrop"), None)
    return Crop(crop.name, _crop_expand(crop, pipeline, crop.name)) if crop else None


def expand_ratios(pipeline: Pipeline) -> tuple[float, float, float, float]:
    """The driven stream's crop expand ratios (0s without a crop of SegScope's ROI)."""
    crop = stream_crop(pipeline)
    return crop.expand if crop else NO_EXPAND


def _resize_spec(element: Element, where: str) -> list[imaging.ResizeSpec]:
    """A resize element's spec, or a crop's own resize (MxpiImageCrop.cpp: only when both sizes are set)."""
    if element.factory == "mxpi_imagecrop" and "0" in (element.props.get("resizeWidth", "0"),
                                                       element.props.get("resizeHeight", "0")):
        return []
    return [imaging.ResizeSpec.from_props(element.props, where)]


def resize_specs(pipeline: Pipeline) -> tuple[imaging.ResizeSpec, ...]:
    """The resizes on the driven stream's way to its model, in order (for mapping outputs back)."""
    stream = pipeline.stream
    return tuple(spec for element in data_path(pipeline) if element.factory in ("mxpi_imagecrop", "mxpi_imageresize")
                 for spec in _resize_spec(element, f"{pipeline.path}: stream {stream.name!r}, element "
                                                   f"{element.name!r}"))


def _decoder(element: Element, pipeline: Pipeline, name: str) -> Decoder:
    if imaging.processor(element.props) == "ascend":
        if element.props.get("formatAdaptation", "off") != "off":
            raise NotEmulated(pipeline, f"{name}: DVPP decode with formatAdaptation on is not emulated")
        return Decoder(dvpp=True)
    data_format = element.props.get("outputDataFormat", "BGR").upper()
    data_type = element.props.get("dataType", "uint8").lower()
    if data_format not in ("BGR", "RGB") or data_type not in ("uint8", "float32"):
        raise SegScopeError(f"{name}: outputDataFormat must be BGR|RGB and dataType uint8|float32")
    return Decoder(data_format == "RGB", data_type == "float32")


def _model_post(element: Element, pipeline: Pipeline, name: str) -> SemanticSeg | None:
    """mxpi_modelinfer runs its `postProcessLibPath` library itself (VisionSDK MxpiModelInfer)."""
    if element.factory != "mxpi_modelinfer" or not element.props.get("postProcessLibPath"):
        return None
    return SemanticSeg.from_element(element, pipeline, name)


def drive_problem(stream: Stream) -> str | None:
    """The one-line reason SegScope cannot send this stream images through an appsrc and read its model's
    results from an appsink, or None."""
    model, source, sink = stream.model_element, stream.input_element, stream.output_element
    if model is None:
        return None
    if source.factory != "appsrc" or model.name not in stream.downstream(source.name):
        return (f"stream {stream.name!r} has no appsrc that reaches its model {model.name!r} (SegScope sends "
                "images to an appsrc)")
    if sink.factory != "appsink":
        return (f"stream {stream.name!r} has no appsink after its model {model.name!r} (it ends in {sink.name!r}, "
                f"a {sink.factory}; SegScope reads results from an appsink)")
    if stream.takes_tensors():
        return (f"stream {stream.name!r} takes tensors, not images (its input {source.name!r} reaches no "
                "mxpi_imagedecoder)")
    return None
