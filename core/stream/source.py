"""What a command runs: `--pipeline FILE` (a MindX stream) or `--model CARD` (a model card without a pipeline:
its `.onnx` on the embedded backend, its `.om` on mindx-model or ais-bench), for `eval` and `profile` alike;
and the one rule for a path named as the model, here and in the viewer (`resolve_source`).
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from ..card.onnx_graph import read_graph
from ..card.reader import MAX_CARD_BYTES, card_path_for
from ..errors import InputError, SegScopeError
from ..files.kinds import RUN_SOURCE, RUN_SOURCES, is_model_card, is_pipeline, not_wanted
from .pipeline import DEFAULT_PIPELINE

LOG = logging.getLogger("segscope.source")
MODEL_HELP = ("a model card (or the .om/.onnx beside one, or a model project folder) to run without a pipeline: "
              "decode, crop, resize to its input and its preprocessing, as the shipped stream does; its .onnx on the "
              "embedded backend, its .om on mindx-model or ais-bench")
#: Cards looked at beside a model that has none of its own name (a models/ folder holds a few).
MAX_CARDS_BESIDE = 200


@dataclass(frozen=True)
class Resolved:
    """What opens for a path named as the model: a `.pipeline` or a model card (None: an ONNX model with no
    card, for which one can be built), and how it was found when that is not the path itself."""

    path: Path | None
    note: str = ""


def _json(path: Path) -> object:
    try:
        if path.stat().st_size > MAX_CARD_BYTES:
            return None
        return json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


def _cards_naming(model: Path) -> list[Path]:
    """The model cards beside `model` whose `onnx` or `om` field names it."""
    found = []
    for card in sorted(islice(model.parent.glob("*.json"), MAX_CARDS_BESIDE)):
        data = _json(card)
        names = [data.get(key) for key in ("onnx", "om")] if isinstance(data, dict) and is_model_card(data) else []
        if any(isinstance(name, str) and name and (card.parent / name).resolve() == model.resolve() for name in names):
            found.append(card)
    return found


def _model_file(path: Path) -> Resolved:
    """An .onnx or .om: its own card (`x.json`), else the one card beside it that names it (said in a note);
    an .onnx without any is checked to be an ONNX model first (None: a card can be built for it)."""
    own = card_path_for(path)
    if own.is_file():
        return Resolved(own)
    naming = _cards_naming(path)
    if len(naming) == 1:
        return Resolved(naming[0], f"{path} has no card of its own name ({own.name}); running {naming[0]}, the card "
                                   "beside it that names it")
    if naming:
        raise InputError(path, f"has no card of its own name ({own.name}) and {len(naming)} cards beside it name it "
                               f"({', '.join(card.name for card in naming)}): give the one to run")
    if path.suffix == ".onnx":
        read_graph(path)  # the cheap check first: not an ONNX model is said before a card is offered
        return Resolved(None)
    raise InputError(path, f"has no model card ({own.name}) beside it, and no card there names it: build one from "
                           "the .onnx it was converted from")


def _project(folder: Path) -> Resolved:
    """A model project folder's pipeline (pipelines/*.pipeline, else *.pipeline), else its card (models/*.json,
    else *.json); the first by name, said in a note when there are several."""
    for pattern in ("pipelines/*.pipeline", "*.pipeline", "models/*.json", "*.json"):
        found = [p for p in sorted(folder.glob(pattern)) if p.suffix == ".pipeline" or is_model_card(_json(p))]
        if found:
            note = f"{folder} holds {len(found)} of them; opening {found[0].name}" if len(found) > 1 else ""
            return Resolved(found[0], note)
    raise not_wanted(folder, RUN_SOURCE)


def resolve_source(path: Path) -> Resolved:
    """What opens for `path` named as the model (`--pipeline`, `--model`, the Backend dialog, File > Open model…):
    a `.pipeline` (or a file holding one), a model card, an `.onnx`/`.om` with its card (`_model_file`), a model
    project folder (`_project`). Anything else is a one-line error saying what the path is and what is taken."""
    path = Path(path)
    if path.is_dir():
        return _project(path)
    if not path.exists():
        raise InputError(path, f"not found; give {RUN_SOURCES}")
    if path.suffix in (".onnx", ".om"):
        return _model_file(path)
    if path.suffix == ".pipeline":
        return Resolved(path)  # its own errors are the pipeline reader's (a file that is no JSON: `not_wanted`)
    data = _json(path)
    if is_model_card(data) or is_pipeline(data):
        return Resolved(path)
    raise not_wanted(path, RUN_SOURCE)


def add_source_options(parser: argparse.ArgumentParser, pipeline_help: str) -> None:
    parser.add_argument("--pipeline", type=Path, default=None, help=pipeline_help)
    parser.add_argument("--model", type=Path, default=None, metavar="CARD", help=MODEL_HELP)


def chosen_source(args: argparse.Namespace) -> Path:
    """The pipeline or model card the command runs (the shipped pipeline when neither is given). The first call
    settles `args` on what `resolve_source` found (its note logged once)."""
    if args.model is None:
        if args.pipeline is None:
            return DEFAULT_PIPELINE
        option, given = "pipeline", args.pipeline
    elif args.pipeline is not None:
        raise SegScopeError("--model and --pipeline: give one (a model card runs without a pipeline)")
    else:
        option, given = "model", args.model
    resolved = resolve_source(given)
    if resolved.path is None:
        raise InputError(given, "has no model card beside it (a card names its preprocessing, outputs and classes): "
                                f"write one with `segscope card {given} --out DIR`, then give DIR/models/"
                                f"{given.stem}.json")
    if resolved.note:
        LOG.info(resolved.note)
    setattr(args, option, resolved.path)
    return resolved.path
