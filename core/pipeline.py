"""MindX `.pipeline` files: load and validate them the way the SDK's stream manager does, and navigate them.

A pipeline file is a JSON object of streams; each stream holds an optional `stream_config` and named
elements `{"factory": ..., "props": {...}, "next": "name" | ["a", "b:1"], "nextMeta": ...}`. The rules
follow VisionSDK `mxStream/src/module/StreamManager/` (MxsmElement.cpp, MxsmStream.cpp): element keys are
limited to props/factory/next/nextMeta; a prop is a string or an object (kept as its JSON text), anything
else is refused; `name:N` links to pad N, and each element's pads are linked 0..k-1 exactly once; streams
may have several sources and sinks, or no model at all; an unknown factory is a custom plugin.

SegScope drives one stream, input and output (`Pipeline.stream`, `Stream.input_element`,
`Stream.output_element`): the first stream (in file order) that runs a model, its first `appsrc` (by
name) that reaches the model, and the first `appsink` that the model reaches.

`modelPath` (and other relative paths in props) are resolved the way the original project ran MindX:
the SDK resolves them against the process working directory, and `run.sh` starts in the project root,
the folder above `pipeline/`. SegScope therefore resolves a relative path against the parent of the folder
that holds the `.pipeline` file, whatever the current directory is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import SegScopeError
from .imaging import PADDING_TYPES, SDK_RESIZE_TYPES, processor
from .model_card import load_model_card

#: The stream SegScope ships: the original U-Net workflow, modelPath "models/unet_hw960_bs1.om". Found beside
#: `core/` without importing `segscope.pipelines`, which the remote worker's core-only bundle does not carry.
DEFAULT_PIPELINE = Path(__file__).resolve().parent.parent / "pipelines" / "unet_simple_opencv.pipeline"

#: The plugins VisionSDK builds (the folders of mxPlugins/src/module, factory = "mxpi_" + lower-case name) and
#: the native GStreamer ones (MxsmElement.cpp gstreamerPlugins_); any other factory is a custom plugin.
_SDK_PLUGINS = (
    "BufferStablizer ChannelImagesStitcher ChannelOsdCoordsConverter ChannelSelector Class2OsdInstances "
    "DataSerialize DataTransfer Distributor DumpData FaceAlignment ImageCrop ImageDecoder ImageEncoder "
    "ImageNormalize ImageResize LoadData ModelInfer MotSimpleSort MotSimpleSortV2 NmsOverlapedRoi "
    "NmsOverlapedRoiV2 Object2OsdInstances ObjectSelector OpencvCenterCrop OpencvOsd OsdInstanceMerger "
    "Parallel2Serial QualityDetection RoiGenerator Rotation RtspSrc SemanticSegStitcher SkipFrame Synchronize "
    "TensorInfer VideoDecoder VideoEncoder WarpPerspective ClassPostProcessor KeypointPostProcessor "
    "ObjectPostProcessor SemanticSegPostProcessor TextGenerationPostProcessor TextObjectPostProcessor"
).split()
_NATIVE = frozenset({"appsrc", "fakesink", "filesink", "appsink", "queue", "tee"})  # gstreamerPlugins_
KNOWN_FACTORIES = _NATIVE | {"mxpi_" + name.lower() for name in _SDK_PLUGINS}
MODEL_FACTORIES = ("mxpi_tensorinfer", "mxpi_modelinfer")
_ELEMENT_KEYS = ("props", "factory", "next", "nextMeta")  # MxsmElement::validElementKeys_
_PATH_PROPS = ("modelPath", "postProcessConfigPath", "labelPath")
#: mxpi_imageresize's unsigned props and their ranges (VisionSDK MxpiImageResize.cpp DefineProperties).
_RESIZE_UINTS = {"resizeHeight": (0, 4096), "resizeWidth": (0, 4096), "paddingHeight": (32, 8192),
                 "paddingWidth": (32, 8192), "scaleValue": (32, 8192), "minDimension": (32, 8192),
                 "maxDimension": (32, 8192), "interpolation": (0, 4)}


class PipelineError(SegScopeError):
    """A `.pipeline` file is malformed: "<file>: <detail>", the detail naming the stream, element and field."""

    def __init__(self, path: Path, detail: str, position: tuple[int, int] | None = None):
        where = f"{path}:{position[0]}:{position[1]}" if position else str(path)
        super().__init__(f"{where}: {detail}")
        # Without the file name, the JSON position spelt out (for `segscope check`'s line).
        self.detail = f"{detail} (line {position[0]}, column {position[1]})" if position else detail


@dataclass(frozen=True)
class Link:
    target: str
    pad: int


@dataclass(frozen=True)
class Element:
    name: str
    factory: str
    props: dict[str, str] = field(default_factory=dict)
    links: tuple[Link, ...] = ()  # `next`, in order
    meta_next: tuple[str, ...] = ()  # `nextMeta`: elements that get this one's metadata as a dataSource

    @property
    def next(self) -> tuple[str, ...]:
        """The names of the elements this one links to (pads dropped)."""
        return tuple(link.target for link in self.links)

    @property
    def custom(self) -> bool:
        return self.factory not in KNOWN_FACTORIES


@dataclass(frozen=True)
class Stream:
    name: str
    config: dict[str, str]
    elements: dict[str, Element]
    order: tuple[str, ...]  # every element, sources first, following `next` links

    def downstream(self, name: str) -> set[str]:
        """Element names reachable from `name` (itself included)."""
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(self.elements[current].next)
        return seen

    def _by_factory(self, factory: str) -> list[Element]:
        """This factory's elements by name, numbers in names compared as numbers (appsink2 < appsink10)."""
        def key(element: Element) -> list[object]:
            return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", element.name)]

        return sorted((e for e in self.elements.values() if e.factory == factory), key=key)

    @property
    def model_element(self) -> Element | None:
        """The first model-running element in stream order."""
        return next((self.elements[n] for n in self.order if self.elements[n].factory in MODEL_FACTORIES), None)

    @property
    def input_element(self) -> Element:
        """The input SegScope feeds: the first appsrc reaching the model (else the first source)."""
        model = self.model_element
        sources = self._by_factory("appsrc")
        for source in sources:
            if model is None or model.name in self.downstream(source.name):
                return source
        return sources[0] if sources else self.elements[self.order[0]]

    @property
    def output_element(self) -> Element:
        """The output SegScope reads: the first appsink the model reaches (else the last element it reaches)."""
        start = self.model_element or self.input_element
        reach = self.downstream(start.name)
        sinks = [e for e in self._by_factory("appsink") if e.name in reach]
        return sinks[0] if sinks else self.elements[[n for n in self.order if n in reach][-1]]

    @property
    def driven_path(self) -> tuple[Element, ...]:
        """Elements on the way from the input to the output, in stream order."""
        reach = self.downstream(self.input_element.name)
        end = self.output_element.name
        return tuple(self.elements[n] for n in self.order if n in reach and end in self.downstream(n))

    def takes_tensors(self) -> bool:
        """True when the driven input reaches no image decoder: its appsrc is fed tensors, not images."""
        return not any(e.factory == "mxpi_imagedecoder" for e in self.driven_path)

    def choice(self) -> str:
        """Which input/output SegScope uses, e.g. "input 'appsrc0', output 'appsink0'"."""
        return f"input {self.input_element.name!r}, output {self.output_element.name!r}"

    def has_several_ends(self) -> bool:
        return len(self._by_factory("appsrc")) > 1 or len(self._by_factory("appsink")) > 1


@dataclass(frozen=True)
class Pipeline:
    path: Path
    text: str
    streams: dict[str, Stream]
    card: Path | None = None  # the model card this stream stands for (`card_pipeline`); None for a file

    @property
    def project_root(self) -> Path:
        return self.path.parent.parent

    @property
    def stream(self) -> Stream:
        """The stream SegScope drives: the first that runs a model (else the file's first)."""
        with_model = [s for s in self.streams.values() if s.model_element is not None]
        return with_model[0] if with_model else next(iter(self.streams.values()))

    @property
    def has_choices(self) -> bool:
        """True when the file has several streams, or the driven one several inputs or outputs."""
        return len(self.streams) > 1 or self.stream.has_several_ends()

    def choice(self) -> str:
        """Which stream, input and output SegScope drives, for messages when the file has several."""
        return f"stream {self.stream.name!r}, {self.stream.choice()}"

    def resolve(self, value: str) -> Path:
        """A path from a prop, resolved as MindX would when started from the project root."""
        path = Path(value).expanduser()
        return path if path.is_absolute() else (self.project_root / path).resolve()

    def model_path(self) -> Path:
        """The resolved `modelPath` of the driven stream's model element."""
        model = self.stream.model_element
        if model is None:
            raise PipelineError(self.path, f"stream {self.stream.name!r} runs no model (no mxpi_tensorinfer or "
                                           "mxpi_modelinfer element): SegScope has nothing to inspect")
        return self.resolve(model.props["modelPath"])

    def file_props(self) -> list[Path]:
        """The resolved files every element's file props name (`modelPath`, `postProcessConfigPath`, ...)."""
        return [self.resolve(element.props[key]) for stream in self.streams.values()
                for element in stream.elements.values() for key in _PATH_PROPS if element.props.get(key)]

    def with_absolute_paths(self) -> str:
        """The pipeline JSON with `modelPath` (and other file props) absolute, for an SDK started anywhere."""
        data = json.loads(self.text)
        for stream in self.streams.values():
            for element in stream.elements.values():
                props = data[stream.name][element.name].get("props", {})
                for key in _PATH_PROPS:
                    if isinstance(props.get(key), str) and props[key]:
                        props[key] = str(self.resolve(props[key]))
        return json.dumps(data, indent=4)


def _error(path: Path, where: str, problem: str) -> PipelineError:
    return PipelineError(path, f"{where}: {problem}")


def _prop_text(value: object) -> str | None:
    """A prop as the SDK passes it on: strings as is, objects as compact JSON; None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):  # nlohmann::json::dump(): no spaces, keys sorted
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return None


def _names(raw: object) -> list[str] | None:
    links = [raw] if isinstance(raw, str) else raw
    return links if isinstance(links, list) and all(isinstance(n, str) for n in links) else None


def _parse_link(text: str) -> Link | None:
    name, sep, pad = text.partition(":")
    if not sep:
        return Link(text, 0)
    return Link(name, int(pad)) if name and re.fullmatch(r"\d+", pad) else None


def _parse_element(path: Path, stream: str, name: str, raw: object) -> Element:
    where = f"stream {stream!r}, element {name!r}"
    if not isinstance(raw, dict):
        raise _error(path, where, "must be a JSON object with 'factory', 'props' and 'next'")
    factory = raw.get("factory")
    if not isinstance(factory, str) or not factory:
        raise _error(path, where, "missing 'factory' (e.g. \"mxpi_imageresize\")")
    extra = sorted(set(raw) - set(_ELEMENT_KEYS))
    if extra and factory not in _NATIVE:
        raise _error(path, where, f"unknown key {extra[0]!r}: MindX accepts only {', '.join(_ELEMENT_KEYS)}")
    if "appsink" in name and not re.match(r"\s*[+-]?\d", name[len("appsink"):]):
        raise _error(path, where, "MindX requires a name with 'appsink' to be 'appsink<number>', e.g. appsink0")
    props = raw.get("props", {})
    if not isinstance(props, dict):
        raise _error(path, where, "'props' must be a JSON object")
    texts: dict[str, str] = {}
    for key, value in props.items():
        text = _prop_text(value)
        if text is None:
            raise _error(path, where, f"prop {key!r} is {json.dumps(value)}, not a string or object: MindX "
                                      f"refuses it; write it as a string, e.g. \"{key}\": \"{value}\"")
        texts[key] = text
    links: dict[str, list[Link]] = {"next": [], "nextMeta": []}
    for key, found in links.items():
        names = _names(raw.get(key, []))
        if names is None:
            raise _error(path, where, f"'{key}' must be an element name or a list of names")
        for text in names:
            link = _parse_link(text)
            if link is None:
                raise _error(path, where, f"'{key}' entry {text!r} is not 'name' or 'name:<pad number>'")
            found.append(link)
    return Element(name, factory, texts, tuple(links["next"]), tuple(link.target for link in links["nextMeta"]))


def _check_links(path: Path, stream: str, elements: dict[str, Element]) -> None:
    """Every target exists; each element's input pads are 0..k-1, each linked once (MxsmStream::LinkElements)."""
    pads: dict[str, list[int]] = {name: [] for name in elements}
    for element in elements.values():
        for link in element.links:
            if link.target not in elements:
                raise _error(path, f"stream {stream!r}, element {element.name!r}",
                             f"'next' names unknown element {link.target!r}")
            pads[link.target].append(link.pad)
        for target in element.meta_next:
            if target not in elements:  # MxsmStream::SetDataSourceProperty
                raise _error(path, f"stream {stream!r}, element {element.name!r}",
                             f"'nextMeta' names unknown element {target!r}")
    for name, used in pads.items():
        if sorted(used) != list(range(len(used))):
            raise _error(path, f"stream {stream!r}, element {name!r}",
                         f"its input pads are linked as {sorted(used)}: MindX needs each of 0..{len(used) - 1} "
                         f"once ('{name}:0', '{name}:1', ...)")


def _stream_order(path: Path, stream: str, elements: dict[str, Element]) -> tuple[str, ...]:
    """Topological order from the sources (file order among equals); refuses cycles."""
    incoming = {name: 0 for name in elements}
    for element in elements.values():
        for target in element.next:
            incoming[target] += 1
    ready = [n for n, count in incoming.items() if count == 0]
    if not ready:
        raise _error(path, f"stream {stream!r}", "has no input element (every element is some 'next' target: "
                                                 "a cycle)")
    order: list[str] = []
    while ready:
        name = ready.pop(0)
        order.append(name)
        for target in elements[name].next:
            incoming[target] -= 1
            if incoming[target] == 0:
                ready.append(target)
    if len(order) != len(elements):
        stuck = sorted(set(elements) - set(order))
        raise _error(path, f"stream {stream!r}", f"'next' links form a cycle through {stuck}: no buffer could "
                                                 "flow; break the loop")
    return tuple(order)


def _check_props(path: Path, stream: Stream) -> None:
    """The prop checks of the plugins' Init that make stream creation fail (VisionSDK MxpiImageResize.cpp,
    MxpiImageCrop.cpp, MxpiImageDecoder.cpp: Init, InitConfig, DefineProperties)."""
    for element in stream.elements.values():
        where = f"stream {stream.name!r}, element {element.name!r}"
        props = element.props
        if element.factory in ("mxpi_imagedecoder", "mxpi_imagecrop", "mxpi_imageresize"):
            if processor(props) not in ("ascend", "opencv"):
                raise _error(path, where, f"cvProcessor/handleMethod {processor(props)!r} must be ascend or opencv")
        if element.factory in ("mxpi_imagecrop", "mxpi_imageresize"):
            for key, allowed in (("resizeType", SDK_RESIZE_TYPES), ("paddingType", PADDING_TYPES)):
                if key in props and props[key] not in allowed:
                    raise _error(path, where, f"{key} {props[key]!r} is unknown to MindX (one of "
                                              f"{', '.join(allowed)})")
        if element.factory == "mxpi_imageresize":
            for key, (low, high) in _RESIZE_UINTS.items():
                value = props.get(key)
                if value is not None and not (value.strip().isdigit() and low <= int(value) <= high):
                    raise _error(path, where, f"{key} must be an integer in {low}..{high}, got {value!r}")
            if int(props.get("minDimension", "224")) > int(props.get("maxDimension", "224")):
                raise _error(path, where, f"minDimension {props['minDimension']} is larger than maxDimension "
                                          f"{props.get('maxDimension', '224')}")
        if element.factory in MODEL_FACTORIES and not element.props.get("modelPath"):
            raise _error(path, where, "missing prop 'modelPath' (the .om model to run)")


def _parse_stream(path: Path, name: str, raw: object) -> Stream:
    if not isinstance(raw, dict):
        raise _error(path, f"stream {name!r}", "must be a JSON object of elements")
    config = raw.get("stream_config", {})
    if not isinstance(config, dict):
        raise _error(path, f"stream {name!r}", "'stream_config' must be a JSON object")
    device = config.get("deviceId", "")
    if not isinstance(device, str) or not re.fullmatch(r"\d*", device):
        raise _error(path, f"stream {name!r}", f"stream_config deviceId must be a string of digits, e.g. \"0\", "
                                               f"got {json.dumps(device)}")
    elements = {key: _parse_element(path, name, key, value) for key, value in raw.items() if key != "stream_config"}
    if not elements:
        raise _error(path, f"stream {name!r}", "has no elements")
    _check_links(path, name, elements)
    stream = Stream(name, {k: str(v) for k, v in config.items()}, elements, _stream_order(path, name, elements))
    _check_props(path, stream)
    return stream


def parse_pipeline(text: str, path: Path) -> Pipeline:
    """Parse and validate pipeline JSON; `path` places relative paths and names the file in errors."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PipelineError(path, f"invalid JSON: {exc.msg}", (exc.lineno, exc.colno)) from None
    except RecursionError:
        raise PipelineError(path, "invalid JSON: nested too deeply") from None
    if not isinstance(data, dict) or not data:
        kinds = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
        got = "an empty object" if isinstance(data, dict) else kinds.get(type(data), "null")
        raise PipelineError(path, f"expected a JSON object of streams, e.g. {{\"my_stream\": {{...}}}}, got {got}")
    return Pipeline(path, text, {name: _parse_stream(path, name, raw) for name, raw in data.items()})


def bare_stream(model_path: str, size: tuple[int, int]) -> dict[str, Any]:
    """The stream SegScope ships (`DEFAULT_PIPELINE`, at 960x960) for `model_path`, resized to the model input
    `size` (width, height): opencv decode, the crop of SegScope's ROI, an opencv stretch, the model (its AIPP
    does the rest), mxpi_dumpdata, appsink. `segscope card` writes it; a model card without a pipeline runs it
    (built here, not read from the shipped file, which the remote worker's bundle does not carry)."""
    width, height = (str(side) for side in size)
    return {"unet_mindspore": {
        "stream_config": {"deviceId": "0"},
        "appsrc0": {"props": {"blocksize": "4096000"}, "factory": "appsrc", "next": "mxpi_imagedecoder0"},
        "mxpi_imagedecoder0": {"props": {"cvProcessor": "opencv", "outputDataFormat": "BGR"},
                               "factory": "mxpi_imagedecoder", "next": "mxpi_imagecrop0"},
        "mxpi_imagecrop0": {"props": {"cvProcessor": "opencv", "dataSource": "ExternalObjects"},
                            "factory": "mxpi_imagecrop", "next": "mxpi_imageresize0"},
        "mxpi_imageresize0": {"props": {"handleMethod": "opencv", "resizeType": "Resizer_Stretch",
                                        "resizeHeight": height, "resizeWidth": width},
                              "factory": "mxpi_imageresize", "next": "mxpi_tensorinfer0"},
        "mxpi_tensorinfer0": {"props": {"dataSource": "mxpi_imageresize0", "modelPath": model_path},
                              "factory": "mxpi_tensorinfer", "next": "mxpi_dumpdata0"},
        "mxpi_dumpdata0": {"props": {"requiredMetaDataKeys": "mxpi_tensorinfer0"}, "factory": "mxpi_dumpdata",
                           "next": "appsink0"},
        "appsink0": {"props": {"blocksize": "4096000"}, "factory": "appsink"},
    }}


def is_model_card(data: object) -> bool:
    """Whether parsed JSON is a model card (an object with an `outputs` list) rather than a pipeline, whose
    values are all stream objects."""
    return isinstance(data, dict) and isinstance(data.get("outputs"), list)


def card_pipeline(card: Path) -> Pipeline:
    """The stream a model card runs without a pipeline: `bare_stream` at the card's input size, its modelPath
    the card's stem with `.om` (so the card is found beside it as for any pipeline)."""
    loaded = load_model_card(card, check_graph=False, warn=False)
    text = json.dumps(bare_stream(str(loaded.path.with_suffix(".om")), loaded.input_size), indent=4)
    return replace(parse_pipeline(text, loaded.path), card=loaded.path)


def card_source(path: Path) -> Path | None:
    """The model card a run source stands for (a card, or the `.om`/`.onnx` beside one), None for a pipeline."""
    path = Path(path)
    if path.suffix in (".om", ".onnx"):
        return path.with_suffix(".json")
    if path.suffix != ".json":
        return None
    try:
        return path if is_model_card(json.loads(path.read_bytes().decode("utf-8"))) else None
    except (OSError, ValueError, RecursionError):  # not readable JSON: load_pipeline names the problem
        return None


def load_pipeline(path: Path) -> Pipeline:
    """Read and validate a `.pipeline` file (structure only; backends check what they can run). A model card
    (or the `.om`/`.onnx` it describes) gives its `card_pipeline`, so every backend runs a bare model too."""
    path = Path(path).resolve()
    card = card_source(path)
    if card is not None:
        return card_pipeline(card)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise PipelineError(path, "pipeline file not found") from None
    except IsADirectoryError:
        raise PipelineError(path, "is a folder, not a pipeline file: give the .pipeline file's path") from None
    except PermissionError:
        raise PipelineError(path, "cannot read the pipeline file (permission denied)") from None
    except UnicodeDecodeError as exc:
        raise PipelineError(path, f"not a UTF-8 text file (byte {exc.start}): is it a .pipeline file?") from None
    except OSError as exc:
        raise PipelineError(path, f"cannot read the pipeline file ({exc.strerror or exc})") from None
    return parse_pipeline(text, path)
