"""What a file or folder the user named holds, and the one message for a path that is not what was asked for.

Every place that takes a path from the user (`--dataset`, `--pipeline`, `--model`, the Backend dialog's
"Pipeline or model", File > Open model… and Open dataset…) says, for a path that is not what it takes, what it
found there and what it takes, in one line (`not_wanted`): "README.md is a Markdown text file, not a pipeline
or model: give a .pipeline file, ...". What a path holds is told from its first bytes (`HEAD_BYTES`) or, for a
folder, from the names in it, never by decoding or loading anything; its name counts only where its content
cannot tell (an Ascend `.om`).
"""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path

from ..errors import InputError
from .image_types import IMAGE_SUFFIXES, RASTER_TYPES, image_types
from .imageheader import image_format

#: How much of a file is read to tell what it is (a model card or a pipeline usually fits whole).
HEAD_BYTES = 64 << 10
#: Folder entries looked at to tell what a folder holds (a dataset's first images are enough).
FOLDER_ENTRIES = 2000
#: The byte-order marks a UTF-16 text file starts with (an editor's "Unicode" save).
UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")
#: How JSON text that is not a bare word starts: a file starting otherwise is no JSON at all.
JSON_STARTS = tuple('{["-0123456789')

#: What each place takes, as its message words it.
RUN_SOURCES = "a .pipeline file, a model card (.json), an .onnx or .om with its card, or a model project folder"
RUN_SOURCE = f"a pipeline or model: give {RUN_SOURCES}"
ONNX_MODEL = "an ONNX model (.onnx)"
_TEXT_NAMES = {".md": "a Markdown text file", ".txt": "a text file", ".py": "a Python script", ".sh": "a shell script",
               ".csv": "a CSV file", ".cfg": "a config file", ".ini": "a config file", ".yaml": "a YAML file",
               ".yml": "a YAML file", ".xml": "an XML file", ".html": "an HTML page"}


def dataset_folder() -> str:
    """What a dataset path must be, with its layouts and the image types read."""
    return (f"a dataset folder (<id>/image.<ext> [+ mask.<ext>] or <name>.<ext> [+ <name>_mask.<ext>], each image "
            f"one of the {image_types()})")


def is_model_card(data: object) -> bool:
    """Whether parsed JSON is a model card (an object with an `outputs` list) rather than a pipeline, whose
    values are all stream objects."""
    return isinstance(data, dict) and isinstance(data.get("outputs"), list)


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


def is_pipeline(data: object) -> bool:
    """Whether parsed JSON looks like a MindX pipeline: an object of streams, each an object whose elements
    name a `factory`."""
    return (isinstance(data, dict) and bool(data) and all(isinstance(stream, dict) for stream in data.values())
            and any(isinstance(element, dict) and "factory" in element
                    for stream in data.values() for element in stream.values()))


def _head(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(HEAD_BYTES)
    except OSError:
        return None


def _whole_json(path: Path) -> object:
    """A small JSON file parsed (None: larger than `HEAD_BYTES`, unreadable or no JSON)."""
    head = _head(path)
    try:
        return json.loads(head) if head is not None and len(head) < HEAD_BYTES else None
    except (ValueError, RecursionError):
        return None


def _json_kind(text: str, whole: bool) -> str:
    if not whole:
        return "a JSON file"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return "a file that starts like JSON but does not parse as JSON"
    if is_model_card(data):
        return "a model card"
    if is_pipeline(data):
        return "a MindX pipeline"
    if isinstance(data, dict) and "rois" in data:
        return "a dataset's ROI sidecar (segscope.json)"
    return "a JSON file that is neither a pipeline nor a model card"


def _file_kind(path: Path) -> str:
    head = _head(path)
    if head is None:
        return "a file SegScope cannot read"
    if not head:
        return "an empty file"
    image = image_format(head)
    if image is not None:
        return f"a {image} image"
    suffix = path.suffix.lower()
    if any(suffix in suffixes for _, suffixes in RASTER_TYPES):  # (a vendor slide's content may be no image)
        return f"a file named {suffix} that holds no image (damaged, or another kind of file renamed)"
    if suffix == ".om":
        return "an Ascend offline model (.om)"
    if suffix == ".onnx":  # ONNX's first field is ir_version (field 1, a varint: tag 0x08)
        return ONNX_MODEL if head[:1] == b"\x08" else "a file named .onnx that is not an ONNX model"
    if head[:2] in UTF16_MARKS:
        return "a UTF-16 text file"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(head) < HEAD_BYTES or exc.start < len(head) - 3:  # not a character cut at the end of the head
            return f"a binary {suffix} file" if suffix else "a binary file"
        text = head[:exc.start].decode("utf-8")
    if "aipp_op" in text:
        return "an AIPP config (a model card names it)"
    if text.lstrip("\ufeff \t\r\n").startswith(JSON_STARTS):
        return _json_kind(text, len(head) < HEAD_BYTES)
    return _TEXT_NAMES.get(suffix, "a text file")


def _folder_kind(path: Path) -> str:
    try:
        entries = list(islice(path.iterdir(), FOLDER_ENTRIES))
    except OSError:
        return "a folder SegScope cannot read"
    names = {entry.name for entry in entries}
    if ({"pipelines", "models"} & names and any((path / sub).is_dir() for sub in ("pipelines", "models"))) \
            or any(entry.suffix == ".pipeline" for entry in entries):
        return "a model project folder"
    images = sum(1 for entry in entries if entry.suffix.lower() in IMAGE_SUFFIXES)
    images += sum(1 for entry in entries if entry.is_dir()
                  and any((entry / f"image{suffix}").exists() for suffix in IMAGE_SUFFIXES))
    if images:
        return f"a folder of {images}{'+' if len(entries) == FOLDER_ENTRIES else ''} images (a dataset)"
    if any(is_model_card(_whole_json(entry)) for entry in entries[:20] if entry.suffix == ".json"):
        return "a folder of model cards"
    return "a folder with no images, pipelines or model cards" if entries else "a folder with nothing in it"


def what_is(path: Path) -> str:
    """What `path` holds, as a noun phrase for a message ("a PNG image", "a Markdown text file", "a model
    project folder", "a folder of 8 images (a dataset)"; "nothing (no such file or folder)")."""
    path = Path(path)
    if path.is_dir():
        return _folder_kind(path)
    if not path.exists():
        return "nothing (no such file or folder)"
    return _file_kind(path)


def not_wanted(path: Path, wanted: str, found: str | None = None) -> InputError:
    """The one-line error for `path` given where `wanted` is taken: what it is (`found`, else `what_is`) and
    what was wanted ("... is a Markdown text file, not a pipeline or model: give ...")."""
    return InputError(path, f"is {found or what_is(path)}, not {wanted}")
