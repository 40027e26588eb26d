"""Several files published into a locked folder as one unit: an export item with its provenance, a card's
project.

Every file is first complete in a temporary file inside the folder (`fileio.write_temp` beside its target,
or a `fileio.staging_folder`), so the moves that publish it never cross a file system. Without overwrite
the moves are no-clobber and a clash undoes what the group had moved. With overwrite the moves (and the
files of an earlier version to remove, such as the PNGs an OME-TIFF export replaces) are first written to a
journal in the folder; the group's record (its last file, an export's provenance) is removed before the
first move and published last. A writer killed half-way leaves the journal, and the next writer to lock the
folder completes it (`recover`) before anything else: an item is never left half old and half new, and no
record ever describes files that are not all in place.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from ..errors import SegScopeError
from .fileio import publish, read_json, write_temp

log = logging.getLogger(__name__)
JOURNAL_PREFIX = ".segscope-journal-"


def _relative(root: Path, path: Path) -> str:
    return Path(path).relative_to(root).as_posix()


def _inside(root: Path, name: object) -> Path | None:
    """`root / name` for a journal entry naming a path inside `root`, else None (a journal is not trusted)."""
    if not isinstance(name, str) or not name:
        return None
    relative = PurePosixPath(name)
    if relative.is_absolute() or ".." in relative.parts:
        return None
    return root / relative


def _apply(root: Path, moves: list[tuple[Path, Path]], remove: list[Path]) -> None:
    """Moves whose source is still there (the rest were made before a kill), then the removals."""
    for source, target in moves:
        if source.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
    for path in remove:
        path.unlink(missing_ok=True)


def publish_group(root: Path, moves: dict[Path, Path], overwrite: bool, remove: Iterable[Path] = ()) -> list[Path]:
    """Move each complete temporary file onto its target (`moves`: target -> temporary file, all inside
    `root`, the record last) as one unit; with `overwrite`, also delete `remove`. Returns the targets."""
    targets = list(moves)
    if not overwrite:
        published: list[Path] = []
        try:
            for target in targets:
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise SegScopeError(f"{target.parent}: cannot write here ({exc.strerror})") from None
                publish(moves[target], target)
                published.append(target)
        except BaseException:
            for path in published:  # no-clobber moves: what this group moved is its own
                path.unlink(missing_ok=True)
            for target in targets[len(published):]:
                moves[target].unlink(missing_ok=True)
            raise
        return published
    blocked = next((t for t in targets if t.exists() and not t.is_file()), None)
    if blocked is not None:  # refused before anything changes: a replacement could never complete
        for target in targets:
            moves[target].unlink(missing_ok=True)
        raise SegScopeError(f"{blocked}: is a folder (or not a regular file) where a file goes; move it away")
    journal = root / f"{JOURNAL_PREFIX}{secrets.token_hex(4)}.json"
    removals = [_relative(root, p) for p in remove if p not in moves]
    document = {"moves": [[_relative(root, moves[t]), _relative(root, t)] for t in targets], "remove": removals}
    try:
        publish(write_temp(journal, (json.dumps(document) + "\n").encode()), journal)
    except BaseException:  # not committed: nothing changed
        for target in targets:
            moves[target].unlink(missing_ok=True)
        raise
    try:
        targets[-1].unlink(missing_ok=True)  # the record goes first: it never describes a mixture
        _apply(root, [(moves[t], t) for t in targets], [root / name for name in removals])
        journal.unlink()
    except OSError as exc:
        raise SegScopeError(f"{targets[-1]}: publishing failed ({exc.strerror or exc}); the next run into "
                            f"{root} completes it") from None
    return targets


def recover(root: Path) -> None:
    """Complete every journal a killed writer left in `root` (call with the folder locked, before removing
    its temporary files); each is logged. A journal that names paths outside `root` is only removed."""
    for journal in sorted(Path(root).glob(f"{JOURNAL_PREFIX}*.json")):
        try:
            document = read_json(journal, "journal", follow_symlinks=False)
        except SegScopeError:
            document = {}
        moves = document.get("moves") if isinstance(document, dict) else None
        remove = document.get("remove") if isinstance(document, dict) else None
        pairs = [(_inside(root, m[0]), _inside(root, m[1])) for m in moves if isinstance(m, list) and len(m) == 2] \
            if isinstance(moves, list) else []
        removals = [_inside(root, name) for name in remove] if isinstance(remove, list) else []
        if pairs and all(a and b for a, b in pairs) and all(removals):
            try:
                _apply(root, pairs, removals)  # type: ignore[arg-type]
            except OSError as exc:
                raise SegScopeError(f"{journal}: cannot complete an interrupted write ({exc.strerror or exc}); "
                                    "check the folder's permissions and disk space") from None
            log.warning("%s: completed a write an interrupted run had started", root)
        journal.unlink(missing_ok=True)
    for partial in Path(root).glob(f".{JOURNAL_PREFIX}*.tmp"):  # a journal killed before it was complete
        partial.unlink(missing_ok=True)
