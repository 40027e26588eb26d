"""Reading a MindX `.pipeline` file (or a model card standing in for one) into `core.stream.pipeline`'s model, the
way the SDK's stream manager validates it.

The rules follow VisionSDK `mxStream/src/module/StreamManager/` (MxsmElement.cpp, MxsmStream.cpp): element keys
are limited to props/factory/next/nextMeta; a prop is a string or an object (kept as its JSON text), anything
else is refused; `name:N` links to pad N, and each element's pads are linked 0..k-1 exactly once; streams
may have several sources and sinks, or no model at all; an unknown factory is a custom plugin.
"""

from __future__ import annotations

import json
import re
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..card.reader import load_model_card
from ..errors import InputError
from ..files.fileio import decode_text, read_bytes
from ..files.kinds import JSON_STARTS, RUN_SOURCE, RUN_SOURCES, UTF16_MARKS, card_source, not_wanted
from ..files.untrusted_json import parse_json
from .imaging import PADDING_TYPES, SDK_RESIZE_TYPES, processor
from .pipeline import MODEL_FACTORIES, NATIVE_FACTORIES, Element, Link, Pipeline, PipelineError, Stream

_ELEMENT_KEYS = ("props", "factory", "next", "nextMeta")  # MxsmElement::validElementKeys_
#: What MindX's stream manager accepts (VisionSDK MxStreamManager.cpp MAX_PIPELINE_STRING and
#: MAX_PIPELINE_SIZE, MxsmDescription.cpp MAX_ELEMENT_NUMS): the JSON text under 10 MiB, at most 256 streams,
#: at most 5120 entries per stream. They also bound SegScope's own work on a file.
MAX_PIPELINE_BYTES = 10 * 1024 * 1024 - 1
MAX_STREAMS = 256
MAX_ELEMENTS = 5120
_INT_MAX = 2**31 - 1  # deviceId is read as a C int
#: mxpi_imageresize's unsigned props and their ranges (VisionSDK MxpiImageResize.cpp DefineProperties).
_RESIZE_UINTS = {"resizeHeight": (0, 4096), "resizeWidth": (0, 4096), "paddingHeight": (32, 8192),
                 "paddingWidth": (32, 8192), "scaleValue": (32, 8192), "minDimension": (32, 8192),
                 "maxDimension": (32, 8192), "interpolation": (0, 4)}


def _decimal(text: str) -> bool:
    """ASCII digits only, as C's isdigit reads them ('²' and '٣' are digits to Python's str.isdigit)."""
    return re.fullmatch(r"[0-9]+", text) is not None


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
    if extra and factory not in NATIVE_FACTORIES:
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
        if "\0" in text:  # the SDK passes props on as C strings: the value would end there
            raise _error(path, where, f"prop {key!r} holds a NUL byte (\\u0000), which MindX would cut the value at")
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
    ready = deque(n for n, count in incoming.items() if count == 0)
    if not ready:
        raise _error(path, f"stream {stream!r}", "has no input element (every element is some 'next' target: "
                                                 "a cycle)")
    order: list[str] = []
    while ready:
        name = ready.popleft()
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
                if value is not None and not (_decimal(value.strip()) and low <= int(value) <= high):
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
    # MxsmStream::GetStreamDeviceId: digits, read as an int that must print back as the same text.
    if not isinstance(device, str) or device and not (_decimal(device) and str(int(device)) == device
                                                      and int(device) <= _INT_MAX):
        raise _error(path, f"stream {name!r}", f"stream_config deviceId must be a string of digits as MindX reads "
                                               f"it (\"0\", \"1\", ..., no leading zeros), got "
                                               f"{json.dumps(device)}")
    if len(raw) > MAX_ELEMENTS:
        raise _error(path, f"stream {name!r}", f"has {len(raw):,} entries; MindX refuses more than {MAX_ELEMENTS:,} "
                                               "per stream (split it into several streams)")
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
        data = parse_json(text, path)
    except InputError as exc:
        raise PipelineError(path, exc.problem, exc.position) from None
    if isinstance(data, dict) and len(data) > MAX_STREAMS:
        raise PipelineError(path, f"has {len(data):,} streams; MindX refuses more than {MAX_STREAMS} in one file")
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


def card_pipeline(card: Path) -> Pipeline:
    """The stream a model card runs without a pipeline: `bare_stream` at the card's input size, its modelPath
    the card's stem with `.om` (so the card is found beside it as for any pipeline)."""
    loaded = load_model_card(card, check_graph=False, warn=False)
    text = json.dumps(bare_stream(str(loaded.path.with_suffix(".om")), loaded.input_size), indent=4)
    return replace(parse_pipeline(text, loaded.path), card=loaded.path)


def load_pipeline(path: Path) -> Pipeline:
    """Read and validate a `.pipeline` file (structure only; backends check what they can run). A model card
    (or the `.om`/`.onnx` it describes) gives its `card_pipeline`, so every backend runs a bare model too."""
    path = Path(path).resolve()
    card = card_source(path)
    if card is not None:
        return card_pipeline(card)
    if path.is_dir():  # what a folder opens is `core.stream.source.resolve_source`'s to say
        raise PipelineError(path, not_wanted(path, "a .pipeline file or a model card").problem)
    if path.suffix != ".pipeline" and not path.exists():  # (a card the viewer remembers, moved since): not a pipeline
        raise PipelineError(path, f"not found; give {RUN_SOURCES}")
    try:
        data = read_bytes(path, "pipeline file", MAX_PIPELINE_BYTES)
    except InputError as exc:
        raise PipelineError(path, exc.problem, exc.position) from None
    try:
        text = decode_text(data, path, "pipeline file")
    except InputError as exc:
        if data[:2] in UTF16_MARKS:  # a pipeline saved in another encoding: the reader's advice
            raise PipelineError(path, exc.problem, exc.position) from None
        text = ""  # binary
    if not text.lstrip(" \t\r\n").startswith(JSON_STARTS):  # no JSON at all: say what the file is
        raise PipelineError(path, not_wanted(path, RUN_SOURCE).problem)
    return parse_pipeline(text, path)
