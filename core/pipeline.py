"""MindX `.pipeline` files: load, validate and navigate a stream description.

A pipeline file is a JSON object of streams; each stream holds an optional `stream_config` and named
elements `{"factory": ..., "props": {...}, "next": "name" | ["a", "b"]}`.

`modelPath` (and other relative paths in props) are resolved the way the original project ran MindX:
the SDK resolves them against the process working directory, and `run.sh` starts in the project root,
the folder above `pipeline/`. SegScope therefore resolves a relative path against the parent of the folder
that holds the `.pipeline` file, whatever the current directory is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SegScopeError

#: The stream SegScope ships: the original U-Net workflow, modelPath "models/unet_hw960_bs1.om". Found beside
#: `core/` without importing `segscope.pipelines`, which the remote worker's core-only bundle does not carry.
DEFAULT_PIPELINE = Path(__file__).resolve().parent.parent / "pipelines" / "unet_simple_opencv.pipeline"

#: Factories the embedded backend emulates; others are valid MindX but need the SDK.
EMBEDDED_FACTORIES = frozenset(
    {"appsrc", "appsink", "mxpi_imagedecoder", "mxpi_imagecrop", "mxpi_imageresize", "mxpi_tensorinfer",
     "mxpi_dumpdata"}
)


class PipelineError(SegScopeError):
    """A `.pipeline` file is malformed; the message names the file, stream and element."""


@dataclass(frozen=True)
class Element:
    name: str
    factory: str
    props: dict[str, str] = field(default_factory=dict)
    next: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stream:
    name: str
    config: dict[str, str]
    elements: dict[str, Element]
    order: tuple[str, ...]  # element names from the input, following `next` links

    @property
    def input_element(self) -> Element:
        return self.elements[self.order[0]]

    @property
    def output_element(self) -> Element:
        return self.elements[self.order[-1]]

    def find(self, factory: str) -> Element | None:
        """The first element of this factory in stream order."""
        return next((self.elements[n] for n in self.order if self.elements[n].factory == factory), None)

    def unsupported_by_embedded(self) -> list[Element]:
        return [self.elements[n] for n in self.order if self.elements[n].factory not in EMBEDDED_FACTORIES]


@dataclass(frozen=True)
class Pipeline:
    path: Path
    text: str
    streams: dict[str, Stream]

    @property
    def project_root(self) -> Path:
        return self.path.parent.parent

    @property
    def stream(self) -> Stream:
        """The stream SegScope drives (the file's first)."""
        return next(iter(self.streams.values()))

    def resolve(self, value: str) -> Path:
        """A path from a prop, resolved as MindX would when started from the project root."""
        path = Path(value).expanduser()
        return path if path.is_absolute() else (self.project_root / path).resolve()

    def model_path(self) -> Path:
        """The resolved `modelPath` of the stream's tensorinfer element."""
        infer = self.stream.find("mxpi_tensorinfer")
        if infer is None:  # validated in load_pipeline
            raise PipelineError(f"{self.path}: stream {self.stream.name!r} has no mxpi_tensorinfer element")
        return self.resolve(infer.props["modelPath"])

    def with_absolute_paths(self) -> str:
        """The pipeline JSON with `modelPath` made absolute, for an SDK started from any directory."""
        data = json.loads(self.text)
        for stream in self.streams.values():
            for element in stream.elements.values():
                if "modelPath" in element.props:
                    props = data[stream.name][element.name]["props"]
                    props["modelPath"] = str(self.resolve(element.props["modelPath"]))
        return json.dumps(data, indent=4)


def _error(path: Path, where: str, problem: str) -> PipelineError:
    return PipelineError(f"{path}: {where}: {problem}")


def _parse_element(path: Path, stream: str, name: str, raw: object) -> Element:
    where = f"stream {stream!r}, element {name!r}"
    if not isinstance(raw, dict):
        raise _error(path, where, "must be a JSON object with 'factory', 'props' and 'next'")
    factory = raw.get("factory")
    if not isinstance(factory, str) or not factory:
        raise _error(path, where, "missing 'factory' (e.g. \"mxpi_imageresize\")")
    props = raw.get("props", {})
    if not isinstance(props, dict):
        raise _error(path, where, "'props' must be a JSON object")
    nxt = raw.get("next", [])
    links = [nxt] if isinstance(nxt, str) else nxt
    if not isinstance(links, list) or not all(isinstance(n, str) for n in links):
        raise _error(path, where, "'next' must be an element name or a list of names")
    # "name:1" links to a numbered pad of that element.
    return Element(name, factory, {k: str(v) for k, v in props.items()}, tuple(n.split(":")[0] for n in links))


def _stream_order(path: Path, stream: str, elements: dict[str, Element]) -> tuple[str, ...]:
    """Topological order from the single input; rejects unknown targets, cycles and orphans."""
    for element in elements.values():
        for target in element.next:
            if target not in elements:
                raise _error(path, f"stream {stream!r}, element {element.name!r}",
                             f"'next' names unknown element {target!r}")
    incoming = {name: 0 for name in elements}
    for element in elements.values():
        for target in element.next:
            incoming[target] += 1
    sources = [n for n, count in incoming.items() if count == 0]
    if len(sources) != 1:
        problem = "has no input element (every element is some 'next' target: a cycle)" if not sources else \
            f"has several inputs {sources}: link them or remove the unused ones"
        raise _error(path, f"stream {stream!r}", problem)
    order: list[str] = []
    ready = sources
    while ready:
        name = ready.pop(0)
        order.append(name)
        for target in elements[name].next:
            incoming[target] -= 1
            if incoming[target] == 0:
                ready.append(target)
    if len(order) != len(elements):
        stuck = sorted(set(elements) - set(order))
        raise _error(path, f"stream {stream!r}", f"'next' links form a cycle through {stuck}")
    return tuple(order)


def _check_props(path: Path, stream: Stream) -> None:
    for name in stream.order:
        element = stream.elements[name]
        where = f"stream {stream.name!r}, element {name!r}"
        if element.factory == "mxpi_imageresize":
            for key in ("resizeHeight", "resizeWidth"):
                value = element.props.get(key)
                if value is not None and not (value.strip().isdigit() and int(value) > 0):
                    raise _error(path, where, f"{key} must be a positive integer, got {value!r}")
        if element.factory == "mxpi_tensorinfer" and not element.props.get("modelPath"):
            raise _error(path, where, "missing prop 'modelPath' (the .om model to run)")
    if stream.find("mxpi_tensorinfer") is None:
        raise _error(path, f"stream {stream.name!r}", "has no mxpi_tensorinfer element: nothing runs a model")


def parse_pipeline(text: str, path: Path) -> Pipeline:
    """Parse and validate pipeline JSON; `path` places relative paths and names the file in errors."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PipelineError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict) or not data:
        raise PipelineError(f"{path}: expected a JSON object of streams, e.g. {{\"my_stream\": {{...}}}}")
    streams: dict[str, Stream] = {}
    for stream_name, raw_stream in data.items():
        if not isinstance(raw_stream, dict):
            raise _error(path, f"stream {stream_name!r}", "must be a JSON object of elements")
        config = raw_stream.get("stream_config", {})
        if not isinstance(config, dict):
            raise _error(path, f"stream {stream_name!r}", "'stream_config' must be a JSON object")
        elements = {
            name: _parse_element(path, stream_name, name, raw)
            for name, raw in raw_stream.items() if name != "stream_config"
        }
        if not elements:
            raise _error(path, f"stream {stream_name!r}", "has no elements")
        stream = Stream(stream_name, {k: str(v) for k, v in config.items()}, elements,
                        _stream_order(path, stream_name, elements))
        _check_props(path, stream)
        streams[stream_name] = stream
    return Pipeline(path, text, streams)


def load_pipeline(path: Path) -> Pipeline:
    """Read and validate a `.pipeline` file (structure only; backends check what they can run)."""
    path = Path(path).resolve()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PipelineError(f"{path}: pipeline file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineError(f"{path}: cannot read pipeline file ({exc})") from None
    return parse_pipeline(text, path)
