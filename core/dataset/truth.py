"""Which ground truth an image is scored against, as an explicit value.

An image of a dataset may have two truth files: the original (`<id>/mask.png`, `<name>_mask.png`, any mask
suffix) and a correction saved by the viewer beside it (`mask_corrected.png`, `<name>_mask_corrected.png`,
always PNG). A `Truth` names the one in use: its kind (`original`; `replaced`, an original a viewer "replace"
save rewrote, its first version kept as `mask.orig.png`; or `corrected`), its path and its SHA-256.
The choice (`segscope eval --truth`):

- `auto` (the default, and the viewer's rule): the saved correction where there is one, else the original;
- `original`: always the original (a correction is ignored);
- `corrected`: only saved corrections; an image without one is scored as an image without a mask.

Nothing here imports `core.dataset.dataset` (which builds on it): `truth_for` takes anything with an
`image_path` and a `mask_path`, as a `DatasetItem` has.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..errors import SegScopeError
from ..files.fileio import sha256_file
from ..files.stamp import short_lock

ORIGINAL = "original"
CORRECTED = "corrected"
#: The kind of an original mask a viewer "replace" save rewrote with the user's edits (its first version kept
#: beside it as `mask.orig.png`): chosen as the original, named apart from it.
REPLACED = "replaced"
AUTO = "auto"
#: What `--truth` accepts.
CHOICES = (AUTO, ORIGINAL, CORRECTED)
#: A flat dataset's masks are `<name>_mask.<suffix>`; a folder dataset's `<id>/mask.<suffix>`.
MASK_SUFFIX = "_mask"
#: Saved corrections (`mask_corrected.png`) sit beside the original mask.
CORRECTED_SUFFIX = "_corrected"
#: Backups (`mask.orig.png`) of an original a "replace" save rewrote sit beside it too.
BACKUP_SUFFIX = ".orig"


def backup_mask_path(mask_path: Path) -> Path:
    """`mask.png` -> `mask.orig.png`: where a replaced original is kept."""
    return Path(mask_path).with_name(f"{Path(mask_path).stem}{BACKUP_SUFFIX}{Path(mask_path).suffix}")


def default_mask_path(image_path: Path) -> Path:
    """Where an image's ground truth lives by the dataset layouts: `<id>/mask.png` or `<name>_mask.png`."""
    image_path = Path(image_path)
    stem = "mask" if image_path.stem == "image" else f"{image_path.stem}{MASK_SUFFIX}"
    return image_path.with_name(f"{stem}.png")


def corrected_mask_path(mask_path: Path) -> Path:
    """`mask.png` -> `mask_corrected.png`, `name_mask.tif` -> `name_mask_corrected.png` (always PNG)."""
    return Path(mask_path).with_name(f"{Path(mask_path).stem}{CORRECTED_SUFFIX}.png")


class HasTruth(Protocol):
    """What `truth_for` reads of an image (a `core.dataset.dataset.DatasetItem`)."""

    @property
    def image_path(self) -> Path: ...

    @property
    def mask_path(self) -> Path | None: ...


@dataclass(frozen=True)
class Truth:
    """The truth file an image is scored against."""

    kind: str  # ORIGINAL, REPLACED or CORRECTED
    path: Path

    def sha256(self) -> str:
        """The file's hex SHA-256 (remembered while its size and modification time stay the same)."""
        return sha256_file(self.path)

    def file_name(self, root: Path | None = None) -> str:
        """The file's path relative to the dataset `root` (POSIX separators), its bare name outside it."""
        if root is not None:
            try:
                return Path(self.path).resolve().relative_to(Path(root).resolve()).as_posix()
            except ValueError:
                pass
        return Path(self.path).name

    def describe(self, root: Path | None = None) -> dict[str, str]:
        """`{"kind", "file", "sha256"}`: how metric rows, metrics.json and provenance name the truth."""
        return {"kind": self.kind, "file": self.file_name(root), "sha256": self.sha256()}

    def brief(self, root: Path | None = None) -> str:
        """`corrected 001/mask_corrected.png (sha256 1a2b3c4d5e6f)`, for a result line (hash shortened)."""
        return f"{self.kind} {self.file_name(root)} (sha256 {self.sha256()[:12]})"


class Described(Protocol):
    """A truth that names itself as `Truth.describe` does (a `Truth`; the viewer's `ImageTruth`, which may be
    unsaved edits: kind "edited")."""

    def describe(self, root: Path | None = None) -> dict[str, str] | None: ...


def truth_fields(truth: Described | None, root: Path | None = None) -> dict[str, str]:
    """A metric row's `truth`, `truth_file` and `truth_sha256` (nothing for an image without a truth)."""
    described = truth.describe(root) if truth is not None else None
    if not described:
        return {}
    return {"truth": described["kind"], "truth_file": described.get("file", ""),
            "truth_sha256": described.get("sha256", "")}


def check_choice(choice: str) -> str:
    """`choice` if it is one of `CHOICES`, else a one-line error."""
    if choice not in CHOICES:
        raise SegScopeError(f"--truth: {choice!r} is not one of {', '.join(CHOICES)}")
    return choice


def superseded_marker(corrected: Path) -> Path:
    """The marker a "replace" save writes while it replaces the original and then deletes this correction: it
    holds the SHA-256 of the new original, so a kill in between is recognised (`settle_superseded`)."""
    return Path(corrected).with_name(f".{Path(corrected).name}.superseded")


def settle_superseded(mask_path: Path, corrected: Path) -> bool:
    """Whether the correction `corrected` still stands: after a "replace" save was killed between replacing the
    original and deleting the correction (the marker names the new original's content), it does not, and it is
    deleted with the marker when the folder allows (a read-only one: it is only not used); a marker of a save
    killed before it replaced the original is removed, the correction standing.

    A marker is settled under the folder's short lock, which a save in flight holds from writing its marker to
    deleting it: judged without the lock, a save midway would look killed before replacing the original, its
    marker would be deleted, and a kill of that save after the replace would leave the older correction
    shadowing the new original."""
    marker = superseded_marker(corrected)
    if not marker.exists():
        return True  # the usual case
    try:
        with short_lock(corrected.parent):
            return _settle(mask_path, corrected, marker, delete=True)
    except SegScopeError:  # a read-only folder, or a writer holding the lock past its wait: judge, delete nothing
        return _settle(mask_path, corrected, marker, delete=False)


def _settle(mask_path: Path, corrected: Path, marker: Path, delete: bool) -> bool:
    try:
        wanted = marker.read_text("ascii").strip()
    except OSError:  # the save in flight finished meanwhile
        return corrected.is_file()
    try:
        done = Path(mask_path).is_file() and sha256_file(mask_path) == wanted
    except SegScopeError:
        done = False
    if delete:
        with contextlib.suppress(OSError):
            if done:
                corrected.unlink(missing_ok=True)
            marker.unlink(missing_ok=True)
    return not done


def truth_for(item: HasTruth, choice: str = AUTO) -> Truth | None:
    """The truth `item` is scored against under `choice`, None when it has none."""
    mask_path = item.mask_path or default_mask_path(item.image_path)
    corrected = corrected_mask_path(mask_path)
    if choice != ORIGINAL and corrected.is_file() and settle_superseded(mask_path, corrected):
        return Truth(CORRECTED, corrected)
    if choice != CORRECTED and item.mask_path is not None:
        return Truth(REPLACED if backup_mask_path(item.mask_path).is_file() else ORIGINAL, item.mask_path)
    return None


def choice_note(items: Sequence[HasTruth], choice: str) -> str | None:
    """What a run says once on stderr about the truth it scores against (None: nothing to say, every image
    has at most its original mask). `--truth corrected` with no correction at all is an error."""
    corrected = sum(1 for item in items if truth_for(item, CORRECTED) is not None)
    if choice == CORRECTED:
        if not corrected:
            raise SegScopeError("--truth corrected: no image of the dataset has a saved correction "
                                "(mask_corrected.png); use --truth auto or original")
        without = len(items) - corrected
        return (f"truth: {corrected} of {len(items)} images scored against their saved correction "
                f"(mask_corrected.png)" + (f"; {without} without one are scored as images without a mask"
                                           if without else ""))
    if not corrected:
        return None
    if choice == ORIGINAL:
        return (f"truth: the original masks (--truth original); {corrected} saved correction(s) "
                "(mask_corrected.png) are not used")
    return (f"truth: {corrected} of {len(items)} images scored against their saved correction "
            "(mask_corrected.png) instead of the original mask; --truth original scores the originals")
