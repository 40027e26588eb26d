"""`segscope check PIPELINE...`: is each file valid for MindX, and can the embedded backend run it?

One line per file:
`<path>: valid for MindX; embedded backend: runs`, `<path>: valid for MindX; embedded backend: cannot run
(<element and why>)` or `<path>: invalid: <stream/element/field and why>`; for a valid stream of images then
`; ROI: ...`, what happens to an ROI (the stream's crop takes it, or SegScope crops it before a stream without
one: `core.stream.input`), followed by `; note: ...` for what the file's validity does not depend on (custom
plugins, a model that lives on the host, DVPP approximated, which stream, input and output SegScope drives).
The exit code is 2 when any file is invalid, else 0 (the command: `core.cli.check`).
"""

from __future__ import annotations

from pathlib import Path

from ..backends.embedded import EmbeddedStream, open_session
from ..errors import SegScopeError
from . import dvpp
from .emulation import NotEmulated, plan_stream
from .input import StreamInput
from .loader import load_pipeline
from .pipeline import Pipeline, PipelineError


def _detail(message: str, path: Path) -> str:
    """A message without its leading file name."""
    prefix = str(path)
    return message[len(prefix):].lstrip(": ") if message.startswith(prefix) else message


def notes(pipeline: Pipeline) -> list[str]:
    """What a user should know about a valid file that does not decide its validity."""
    found = []
    for stream in pipeline.streams.values():
        for element in stream.elements.values():
            if element.custom:
                found.append(f"{element.name} is a custom plugin ({element.factory}): valid if installed on the "
                             "host")
    try:
        if plan_stream(pipeline).decoder.dvpp:
            found.append(dvpp.NOTE)
    except SegScopeError:
        pass  # the embedded verdict says why
    if pipeline.has_choices:
        found.append(f"SegScope drives {pipeline.choice()}")
    if pipeline.stream.model_element is not None:
        model = pipeline.model_path()
        if not model.is_file():
            found.append(f"modelPath {model} is not here: MindX needs it on the Ascend host")
    return found


def embedded_verdict(pipeline: Pipeline) -> str:
    """The embedded backend's verdict: runs, or cannot run (why). It opens the stream and the model's ONNX."""
    try:
        open_session(EmbeddedStream(pipeline).card, threads=1)
    except NotEmulated as exc:
        return f"cannot run ({exc.reason})"
    except SegScopeError as exc:
        return f"cannot run ({_detail(str(exc), pipeline.path)})"
    return "runs"


def check_line(path: Path) -> tuple[bool, str]:
    """(valid for MindX, the line to print) for one file."""
    try:
        pipeline = load_pipeline(path)
    except PipelineError as exc:
        return False, f"{path}: invalid: {exc.detail}"
    line = f"{path}: valid for MindX; embedded backend: {embedded_verdict(pipeline)}"
    stream = pipeline.stream
    if stream.model_element is not None and not stream.takes_tensors():
        line += f"; {StreamInput.of(pipeline).describe()}"
    return True, "".join([line, *(f"; note: {note}" for note in notes(pipeline))])
