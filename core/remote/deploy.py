"""What the client puts on the host: the worker bundle and the pipeline's project files.

Both are content-addressed: a folder named by version and hash under the host's cache, uploaded once
and reused by every later session (a changed file gives a new hash, hence a new folder). Files are
written under a temporary name and renamed into place, so an interrupted upload is never used.
"""

from __future__ import annotations

import hashlib
import io
import json
import posixpath
import uuid
import zipfile
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

import paramiko

from ..errors import BackendError, SegScopeError
from ..pipeline import load_pipeline
from . import worker

#: The host folder under which bundles and projects are cached (relative paths start at the home folder).
DEFAULT_CACHE_DIR = ".cache/segscope"
#: Model card fields that name files the backends read (beside the card).
_CARD_FILES = ("onnx", "om", "aipp")


@dataclass(frozen=True)
class Bundle:
    """Files (relative POSIX path -> bytes) that go into one cache folder named `name`."""

    name: str
    files: dict[str, bytes]


def _digest(files: dict[str, bytes]) -> str:
    sha = hashlib.sha256()
    for name in sorted(files):
        sha.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return sha.hexdigest()[:16]


def _version() -> str:
    try:
        return metadata.version("segscope")
    except metadata.PackageNotFoundError:
        return "dev"


@cache
def worker_bundle() -> Bundle:
    """`worker.py` + `segscope-core.zip` (every module of `segscope.core`, zipped reproducibly)."""
    core = Path(worker.__file__).resolve().parent.parent
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        entries = [("segscope/__init__.py", b"")]
        entries += [(f"segscope/core/{path.relative_to(core).as_posix()}", path.read_bytes())
                    for path in sorted(core.rglob("*.py"))]
        for name, data in entries:
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    files = {"worker.py": Path(worker.__file__).read_bytes(), worker.BUNDLE: buffer.getvalue()}
    return Bundle(f"worker-{_version()}-{_digest(files)}", files)


def project_bundle(pipeline_path: Path) -> tuple[Bundle, str]:
    """The pipeline, its model card and the files the card names, laid out as in the local project.

    Returns the bundle and the pipeline's path inside it. Missing files are skipped (a `.om` may exist only
    on the host); the worker reports what its backend lacks.
    """
    pipeline = load_pipeline(pipeline_path)
    root = pipeline.project_root
    card_path = pipeline.model_path().with_suffix(".json")
    paths = [pipeline.path, pipeline.model_path(), card_path]
    if card_path.is_file():
        try:
            card = json.loads(card_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SegScopeError(f"{card_path}: cannot read the model card ({exc})") from None
        if isinstance(card, dict):
            paths += [card_path.parent / card[key] for key in _CARD_FILES if isinstance(card.get(key), str)]
    files: dict[str, bytes] = {}
    for path in paths:
        path = path.resolve()
        if not path.is_file():
            continue
        try:
            relative = path.relative_to(root).as_posix()
        except ValueError:
            raise SegScopeError(f"{path}: lies outside the project folder {root}, so it cannot be uploaded with "
                                "the pipeline; move it under the project or give the pipeline's path on the "
                                "host") from None
        files[relative] = path.read_bytes()
    return Bundle(f"project-{_digest(files)}", files), pipeline.path.relative_to(root).as_posix()


def _stat(sftp: paramiko.SFTPClient, path: str) -> paramiko.SFTPAttributes | None:
    try:
        return sftp.stat(path)
    except OSError:
        return None


def _makedirs(sftp: paramiko.SFTPClient, path: str) -> None:
    parts = path.split("/")
    for i in range(2 if path.startswith("/") else 1, len(parts) + 1):
        folder = "/".join(parts[:i])
        if _stat(sftp, folder) is None:
            sftp.mkdir(folder, 0o700)


def upload(sftp: paramiko.SFTPClient, cache_dir: str, bundle: Bundle, label: str) -> str:
    """Put `bundle` in `cache_dir/bundle.name` on the host unless already there; the folder's absolute path."""
    home = sftp.normalize(".")
    folder = posixpath.join(home, cache_dir, bundle.name)
    try:
        for name, data in sorted(bundle.files.items()):
            target = posixpath.join(folder, name)
            found = _stat(sftp, target)
            if found is not None and found.st_size == len(data):
                continue
            _makedirs(sftp, posixpath.dirname(target))
            temporary = f"{target}.{uuid.uuid4().hex[:8]}.part"
            with sftp.open(temporary, "wb") as f:
                f.set_pipelined(True)
                f.write(data)
            sftp.posix_rename(temporary, target)
    except OSError as exc:
        raise BackendError(f"{label}: cannot upload to {folder} ({exc}); check the disk space and permissions "
                           "there, or choose another remote cache folder") from None
    return folder
