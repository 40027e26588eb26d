"""MindX `.pipeline` files as a model: streams of elements and their links, and how to navigate them
(reading a file into it, with the SDK's rules: `core.stream.loader`).

A pipeline file is a JSON object of streams; each stream holds an optional `stream_config` and named
elements `{"factory": ..., "props": {...}, "next": "name" | ["a", "b:1"], "nextMeta": ...}`.

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
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError

#: The stream SegScope ships: the original U-Net workflow, modelPath "models/unet_hw960_bs1.om". Found beside
#: `core/` without importing `segscope.pipelines`, which the remote worker's core-only bundle does not carry.
DEFAULT_PIPELINE = Path(__file__).resolve().parents[2] / "pipelines" / "unet_simple_opencv.pipeline"

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
NATIVE_FACTORIES = frozenset({"appsrc", "fakesink", "filesink", "appsink", "queue", "tee"})  # gstreamerPlugins_
KNOWN_FACTORIES = NATIVE_FACTORIES | {"mxpi_" + name.lower() for name in _SDK_PLUGINS}
MODEL_FACTORIES = ("mxpi_tensorinfer", "mxpi_modelinfer")
_PATH_PROPS = ("modelPath", "postProcessConfigPath", "labelPath")


class PipelineError(InputError):
    """A `.pipeline` file is malformed: "<file>: <detail>", the detail naming the stream, element and field."""


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
            return [int(part) if part.isdecimal() else part for part in re.split(r"(\d+)", element.name)]

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

    def upstream(self, name: str) -> set[str]:
        """Element names that reach `name` (itself included)."""
        parents: dict[str, list[str]] = {}
        for element in self.elements.values():
            for target in element.next:
                parents.setdefault(target, []).append(element.name)
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(parents.get(current, ()))
        return seen

    @property
    def driven_path(self) -> tuple[Element, ...]:
        """Elements on the way from the input to the output, in stream order (linear in the stream's size)."""
        reach, back = self.downstream(self.input_element.name), self.upstream(self.output_element.name)
        return tuple(self.elements[n] for n in self.order if n in reach and n in back)

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
