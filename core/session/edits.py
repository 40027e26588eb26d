"""The session's ground truth: which mask each image is scored against (`Truth`), the mask document of the
image on screen, its saves and discards, and the edits a crash left.

Every change of an image's mask goes through here and gives its truth a new version, so its numbers go stale
and are scored again (`core.session.scoring`): an edit, undo or redo, a save, a discard, recovered edits.
Recovered edits are found when a dataset opens (`recovered_edits`, on the open's job), announced at once
(`EditsRecovered`: the images named, their rows marked unsaved) and scored from the first moment: until the
image is shown its truth holds them; when it is shown they become the document's edits (one undo step back to
the file), with the same version, so the numbers stay fresh. `discard_recovered` deletes them instead.
"""

from __future__ import annotations

import itertools
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..dataset.dataset import Dataset, DatasetItem
from ..dataset.truth import Truth, backup_mask_path
from ..editing.document import MaskDocument, mask_source
from ..editing.files import (
    Recovery,
    SavedMask,
    SaveMode,
    claim_recovery,
    discard_recovery,
    find_each_recoveries,
    keep_copy,
    read_stamps,
)
from ..errors import SegScopeError
from ..files.stamp import Stamp, WriteConflict
from .backend_state import BackendState
from .events import EditsRecovered, MaskChanged, Message, SaveConflict, SessionEvents, TruthChanged
from .jobs import Job
from .truth import ImageTruth, TruthFiles, stamp_of, truth_files


@dataclass(frozen=True)
class Recovered:
    """The edits a crash left of some images of a dataset (found on a worker), and what could not be read."""

    root: Path
    found: tuple[tuple[str, Recovery], ...]
    problems: tuple[str, ...] = ()


def recovered_edits(dataset: Dataset, recovery_dir: Path | None) -> Recovered:
    """The auto-saved edits of `dataset`'s images newer than their mask files (reads files: any thread): the
    newest of each image (this viewer's, or a stopped viewer's), a line for each other one kept and for each
    that cannot be read (skipped: one damaged file never ends the restore)."""
    found, problems = [], []
    each = find_each_recoveries([mask_source(item) for item in dataset.items], recovery_dir)
    for item, (recoveries, damaged) in zip(dataset.items, each):
        problems += [f"{item.id}: {problem}" for problem in damaged]
        if recoveries:
            found.append((item.id, recoveries[0]))
        problems += [f"{item.id}: older unsaved edits of another viewer, auto-saved at {_when(other.saved_at)}, "
                     f"are kept in {other.path}" for other in recoveries[1:]]
    return Recovered(dataset.root, tuple(found), tuple(problems))


def _when(saved_at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(saved_at))


class SessionEdits:
    """The ground-truth half of `Session` (a mixin: it reads the session's dataset and announces changes)."""

    events: SessionEvents
    dataset: Dataset | None
    document: MaskDocument | None
    current: DatasetItem | None
    recovery_dir: Path | None
    backend: BackendState | None
    _dataset: Callable[[], Dataset]
    _item_changed: Callable[[str], None]

    def __init__(self) -> None:
        self._truths: dict[str, ImageTruth] = {}
        self._versions = itertools.count(1)
        #: The version of every truth read from its file since the files were last read anew (`_forget_truths`):
        #: reading a truth is no change, so a truth first read later is of the same version (`truth_versions`).
        self._read_version = next(self._versions)

    def _forget_truths(self, keep_edits: bool = False) -> None:
        """A dataset (re)opens, or its masks are read by another rule: every truth is read again from its files,
        when asked for, under a new version, but (`keep_edits`) those with unsaved edits, on screen or recovered
        after a crash: the user's edits stay their images' truth."""
        self._truths = {item_id: truth for item_id, truth in self._truths.items() if keep_edits and truth.edits}
        self._read_version = next(self._versions)

    def truth(self, item_id: str) -> ImageTruth:
        """What the image is scored against now."""
        truth = self._truths.get(item_id)
        if truth is None:
            dataset = self._dataset()
            file, stamp = truth_files(dataset, [dataset.item(item_id)])[item_id]
            truth = self._truths[item_id] = ImageTruth(file, self._read_version, stamp=stamp)
        return truth

    def _read_ahead(self, read: TruthFiles) -> None:
        """Take the truths read ahead on a worker (`truth_files`) as read now, for the images whose truth is not
        held (the truths were just forgotten: a dataset opens)."""
        for item_id, (file, stamp) in read.items():
            self._truths.setdefault(item_id, ImageTruth(file, self._read_version, stamp=stamp))

    def check_truth_files(self, item_ids: Iterable[str]) -> list[str]:
        """Look at the truth files of these images (a look, a focus): a truth without unsaved edits whose file
        another viewer or program replaced, added (a correction) or removed since it was read is read again under a
        new version, so its numbers are scored again and its views follow; returns those images."""
        dataset, changed = self._dataset(), []
        for item_id in item_ids:
            held = self._truths.get(item_id)
            if held is None or held.edits or held.recovered is not None or item_id not in dataset:
                continue
            file = dataset.truth(dataset.item(item_id))
            stamp = stamp_of(file)
            if (file.path if file is not None else None) != held.path or not held.stamp.same(stamp):
                self._set_truth(item_id, ImageTruth(file, next(self._versions), stamp=stamp))
                changed.append(item_id)
        return changed

    def truth_version(self, item_id: str) -> int:
        """The version of the image's truth now, as `truth(item_id).version`, without finding its file (a score's
        key needs only this: a result of a Run all is keyed without a `stat` in the session's thread)."""
        truth = self._truths.get(item_id)
        return truth.version if truth is not None else self._read_version

    def truth_versions(self) -> Callable[[str], int | None]:
        """The truth version a score made now from each image's mask file is of (None: the image has unsaved
        edits, so such a score is of no version), as of now, for a job that scores later: O(truths read), not
        O(images), so a run of 100,000 images starts at once."""
        read, held = self._read_version, {item_id: None if truth.edits else truth.version
                                          for item_id, truth in self._truths.items()}
        return lambda item_id: held.get(item_id, read)

    def _set_truth(self, item_id: str, truth: ImageTruth) -> None:
        old = self._truths.get(item_id)
        self._truths[item_id] = truth
        if old is None or truth != old or truth.recovered is not old.recovered:
            self.events.truth_changed.emit(TruthChanged(item_id, truth))
            self._item_changed(item_id)

    def _changed_truth(self, item_id: str, edits: bool, recovered: Recovery | None = None,
                       file: Truth | None = None) -> None:
        """The image's mask changed: now with or without unsaved `edits` (`recovered`: held by a recovery file),
        on the truth `file` (default: the same), with a new version."""
        truth = self.truth(item_id)
        stamp = stamp_of(file) if file is not None else truth.stamp  # (a save: the file as written)
        self._set_truth(item_id, ImageTruth(file or truth.file, next(self._versions), edits, recovered, stamp))

    def edited_mask(self, item_id: str) -> Callable[[], np.ndarray | None]:
        """Where the mask an image is scored against is read from when it has unsaved edits (the document on
        screen, the recovered edits), as work for any thread; `lambda: None`: its file."""
        document, truth = self.document, self.truth(item_id)
        if document is not None and document.item.id == item_id:
            if truth.edits:
                return lambda: document.mask  # (read in place: an edit meanwhile makes the score stale)
            held = document.disk_mask
            return lambda: held
        recovered = truth.recovered
        if recovered is not None:
            return lambda: recovered.mask
        return lambda: None

    # ---------------------------------------------------------------------------------------- document
    def _adopt_document(self, document: MaskDocument) -> None:
        """A new document: it follows the image's truth, and recovered edits become its edits."""
        item_id = document.item.id
        held = weakref.ref(document)  # (the document itself would hold itself through its events: a cycle that
        # keeps it and its dataset, every item, alive after another opens, until the collector's next full walk)
        document.events.changed.connect(lambda kind: self._on_document_changed(held(), kind))
        recovered = self.truth(item_id).recovered
        if recovered is not None:
            self._restore_into(document, recovered)

    def _restore_into(self, document: MaskDocument, recovered: Recovery) -> None:
        try:
            classes = self.backend.class_names if self.backend is not None else ()
            document.restore(recovered.mask, max(len(classes), 2))
        except SegScopeError as exc:
            self._changed_truth(document.item.id, False)
            self.events.message.emit(Message("error", f"{document.item.id}: cannot restore the recovered edits "
                                                      f"({exc}); they are kept in {recovered.path}"))

    def _on_document_changed(self, document: MaskDocument | None, kind: str) -> None:
        if document is None or self.document is not document:
            return
        item_id = document.item.id
        if self.current is not None and self.current.id == item_id:
            self.current = document.item  # a saved new mask is adopted into the dataset
        if kind == "restore":  # the recovered edits, now on screen: the same mask, the same version
            self._set_truth(item_id, replace(self.truth(item_id), edits=True, recovered=None))
        else:
            self._changed_truth(item_id, document.dirty, file=self._dataset().truth(document.item))
            if kind == "edit" and not document.dirty:  # undone back to the file: nothing is left to recover
                discard_recovery(document.source, self.recovery_dir)
        self.events.mask_changed.emit(MaskChanged(item_id, kind))

    def save_job(self, mode: SaveMode, before: Callable[[], object] | None = None,
                 overwrite: bool = False) -> Job[tuple[SavedMask, np.ndarray] | WriteConflict]:
        """Save the edits on screen the chosen way: encoded and written by the job (`before()` first, on its
        thread), adopted when done; a failure leaves the edits unsaved and says why. A truth file another
        writer changed since it was read is not overwritten (unless `overwrite`): the edits stay unsaved and
        `save_conflict` asks the user (`resolve_conflict`). SegScopeError: nothing to save."""
        document = self.document
        if document is None or document.editor is None:
            raise SegScopeError("no mask edits to save")
        work, item_id, source = document.save_job(mode, overwrite), document.item.id, document.source

        def write() -> tuple[SavedMask, np.ndarray] | WriteConflict:
            if before is not None:
                before()
            try:
                return work()
            except WriteConflict as conflict:
                return conflict

        def done(answer: tuple[SavedMask, np.ndarray] | WriteConflict) -> None:
            if isinstance(answer, WriteConflict):
                document.save_failed()
                self.events.message.emit(Message("warning", f"Not saved: {answer}"))
                self.events.save_conflict.emit(SaveConflict(item_id, mode, answer.path, str(answer)))
                return
            document.saved(*answer)
            backup = backup_mask_path(source)
            kept = f"; the original is kept as {backup.name}" if mode == "replace" and backup.exists() else ""
            self.events.message.emit(Message("info", f"Saved the mask of {item_id} to {answer[0].path}{kept}"))

        def failed(text: str, details: str) -> None:
            document.save_failed()
            self.events.message.emit(Message("error", f"Saving the mask of {item_id}: {text}", details))

        return Job(f"save:{item_id}", write, done, failed)

    def resolve_conflict(self, conflict: SaveConflict, choice: str) -> Job[object]:
        """The user's answer to a `SaveConflict` of the document on screen: "overwrite" saves the edits over the
        other writer's file; "theirs" drops the edits and shows the mask as the other writer left it; "copy"
        first keeps the edits as a new file beside the mask (`files.keep_copy`), then shows theirs."""
        document = self.document
        if document is None or document.item.id != conflict.item_id:
            raise SegScopeError(f"{conflict.item_id} is no longer the image on screen; its edits were not saved")
        if choice == "overwrite":
            return self.save_job(conflict.mode, overwrite=True)  # type: ignore[arg-type,return-value]
        if choice not in ("theirs", "copy"):
            raise SegScopeError(f"conflict choice {choice!r}: choose copy, theirs or overwrite")
        dataset, item_id, source = self._dataset(), conflict.item_id, document.source
        mine = document.mask.copy() if choice == "copy" and document.mask is not None else None

        def read() -> tuple[Path | None, np.ndarray | None, dict[Path, Stamp]]:
            copy = keep_copy(mine, source) if mine is not None else None
            stamps = read_stamps(source)  # (before the read: a change meanwhile is a conflict, never missed)
            return copy, dataset.load_mask(dataset.item(item_id)), stamps

        def done(answer: tuple[Path | None, np.ndarray | None, dict[Path, Stamp]]) -> None:
            copy, mask, stamps = answer
            if self.document is not document:
                return
            discard_recovery(source, self.recovery_dir)
            document.reload(mask, stamps)
            kept = f"your edits are kept in {copy}; " if copy is not None else "your edits were dropped; "
            self.events.message.emit(Message("info", f"{item_id}: {kept}the mask is now the one on disk"))

        def failed(text: str, details: str) -> None:
            self.events.message.emit(Message("error", f"{item_id}: {text}; your edits are still unsaved", details))

        return Job(f"conflict:{item_id}", read, done, failed)  # type: ignore[arg-type]

    def discard(self) -> None:
        """Forget the unsaved edits on screen and their recovery file: the mask on disk is the truth again."""
        if self.document is not None:
            self.document.discard()

    # ---------------------------------------------------------------------------------------- recovery
    def adopt_recovered(self, recovered: Recovered) -> list[str]:
        """Take the edits a crash left (found by `recovered_edits`) as the images' unsaved edits, and announce
        them; returns the images'. Edits of another dataset, or of an image with edits on screen, are left."""
        dataset = self.dataset
        for problem in recovered.problems:
            self.events.message.emit(Message("warning", problem))
        if dataset is None or recovered.root != dataset.root:
            return []
        taken = []
        for item_id, recovery in recovered.found:
            document = self.document if self.document is not None and self.document.item.id == item_id else None
            if self.truth(item_id).edits or (document is not None and document.dirty):
                continue
            recovery = claim_recovery(recovery, self.recovery_dir)
            self._changed_truth(item_id, True, recovery)
            if document is not None:
                self._restore_into(document, recovery)
            taken.append(item_id)
        if taken:
            saved_at = max(recovery.saved_at for item_id, recovery in recovered.found if item_id in taken)
            when = _when(saved_at)
            self.events.message.emit(Message(
                "warning", f"Unsaved mask edits of {', '.join(taken)} (auto-saved up to {when}) were kept after "
                           "SegScope stopped: they are these images' unsaved edits again (their rows say unsaved, "
                           "their numbers are of them); save or discard them"))
            self.events.edits_recovered.emit(EditsRecovered(tuple(taken), saved_at))
        return taken

    def discard_recovered(self, item_ids: Iterator[str] | list[str] | tuple[str, ...]) -> None:
        """Delete the recovered edits of these images (the user declined them): their files are the truth."""
        for item_id in item_ids:
            document = self.document
            if document is not None and document.item.id == item_id:
                document.discard()
                continue
            if self.truth(item_id).recovered is not None:
                item = self._dataset().item(item_id)
                discard_recovery(mask_source(item), self.recovery_dir)
                self._changed_truth(item_id, False)
