"""What the client puts on the host: the worker bundle and the pipeline's project files.

Both are content-addressed: a folder named by version and hash under the host's cache, uploaded once
and reused by every later session (a changed file gives a new hash, hence a new folder). What is reused
is checked by its SHA-256 on the host (a file changed there, even to the same size, is uploaded again);
what is written goes under a temporary name, is checked by size (a short write is a full host disk) and
by SHA-256, and only then renamed into place, so an interrupted or truncated upload is never used.
"""

from __future__ import annotations

import hashlib
import io
import logging
import posixpath
import re
import shlex
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Optional

import paramiko

from ..card.onnx_graph import read_graph
from ..compat import TIMEOUTS
from ..errors import BackendError, SegScopeError
from ..files.fileio import read_bytes, read_json
from ..stream.loader import load_pipeline
from . import worker

#: The host folder under which bundles and projects are cached (relative paths start at the home folder).
DEFAULT_CACHE_DIR = ".cache/segscope"
#: Model card fields that name files the backends read (beside the card).
_CARD_FILES = ("onnx", "om", "aipp")
#: Prints a marker line, then each argument file's SHA-256 (or "-" when it cannot be read), one a line; any
#: Python 2.7+ / 3. What a login shell prints before it is not part of the reply.
_HASH_MARKER = "segscope-sha256:"
_HASH_SCRIPT = f"""import hashlib, sys
print("{_HASH_MARKER}")
for name in sys.argv[1:]:
    try:
        digest = hashlib.sha256()
        with open(name, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        print(digest.hexdigest())
    except (IOError, OSError):
        print("-")
"""
_SHA256 = re.compile(r"^(?:[0-9a-f]{64}|-)$")

#: Host paths -> their SHA-256 (None for a file that cannot be read), computed on the host.
HashFiles = Callable[[list[str]], dict[str, Optional[str]]]  # noqa: UP045 - evaluated at run time (3.9)

log = logging.getLogger(__name__)


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
    """The pipeline, the files its elements name (model, post-processor config, labels), the model card, the
    files the card names and an ONNX model's external weights, laid out as in the local project.

    Returns the bundle and the pipeline's path inside it. Missing files are skipped (a `.om` may exist only
    on the host); the worker reports what its backend lacks.
    """
    pipeline = load_pipeline(pipeline_path)
    root = pipeline.project_root
    card_path = pipeline.model_path().with_suffix(".json")
    paths = [pipeline.path, *pipeline.file_props(), card_path]
    if card_path.is_file():
        card = read_json(card_path, "model card")
        if isinstance(card, dict):
            paths += [card_path.parent / card[key] for key in _CARD_FILES if isinstance(card.get(key), str)]
    paths += [model.parent / name for model in paths if model.suffix == ".onnx" and model.is_file()
              for name in read_graph(model).external_files]
    files: dict[str, bytes] = {}
    for path in dict.fromkeys(paths):
        path = path.resolve()
        if not path.is_file():
            continue
        try:
            relative = path.relative_to(root).as_posix()
        except ValueError:
            raise SegScopeError(f"{path}: lies outside the project folder {root}, so it cannot be uploaded with "
                                "the pipeline; move it under the project or give the pipeline's path on the "
                                "host") from None
        files[relative] = read_bytes(path)
    return Bundle(f"project-{_digest(files)}", files), pipeline.path.relative_to(root).as_posix()


def _stat(sftp: paramiko.SFTPClient, path: str) -> paramiko.SFTPAttributes | None:
    try:
        return sftp.stat(path)
    except TIMEOUTS:
        raise
    except OSError:
        return None


def _makedirs(sftp: paramiko.SFTPClient, path: str) -> None:
    parts = path.split("/")
    for i in range(2 if path.startswith("/") else 1, len(parts) + 1):
        folder = "/".join(parts[:i])
        if _stat(sftp, folder) is None:
            sftp.mkdir(folder, 0o700)


def hash_command(python: str, paths: list[str]) -> str:
    """The host command printing the SHA-256 of each of `paths` (see `_HASH_SCRIPT`)."""
    return shlex.join([python, "-c", _HASH_SCRIPT, *paths])


def parse_hashes(output: str, paths: list[str], label: str) -> dict[str, str | None]:
    """`hash_command`'s output after its marker line, checked line by line (a host's reply is not trusted)."""
    lines = output.splitlines()
    lines = lines[len(lines) - lines[::-1].index(_HASH_MARKER):] if _HASH_MARKER in lines else []
    if len(lines) != len(paths) or not all(_SHA256.match(line) for line in lines):
        raise BackendError(f"{label}: the host sent an invalid reply (field sha256 of the cache files); "
                           "check the remote python")
    return {path: None if lines[i] == "-" else lines[i] for i, path in enumerate(paths)}


def _remove(sftp: paramiko.SFTPClient, path: str) -> None:
    try:
        sftp.remove(path)
    except OSError:
        pass


def _write(sftp: paramiko.SFTPClient, target: str, data: bytes, label: str) -> str:
    """`data` in a temporary file beside `target`; its path. A short file (a full disk) is removed and named."""
    _makedirs(sftp, posixpath.dirname(target))
    temporary = f"{target}.{uuid.uuid4().hex[:8]}.part"
    failure: OSError | None = None
    try:
        with sftp.open(temporary, "wb") as f:
            f.set_pipelined(True)
            f.write(data)
    except TIMEOUTS:
        raise
    except OSError as exc:  # OpenSSH's sftp-server reports ENOSPC as a bare "Failure"
        failure = exc
    found = _stat(sftp, temporary)
    size = found.st_size if found is not None and found.st_size is not None else 0
    if size != len(data) or failure is not None:
        _remove(sftp, temporary)
        if size < len(data) and found is not None:
            raise BackendError(f"{label}: host disk full at {target} (wrote {size:,} of {len(data):,} bytes); free "
                               "space there or choose another remote cache folder")
        raise BackendError(f"{label}: cannot upload {target} ({failure or 'the file did not appear'}); check the "
                           "disk space and permissions there, or choose another remote cache folder")
    return temporary


def upload(sftp: paramiko.SFTPClient, cache_dir: str, bundle: Bundle, label: str, hash_files: HashFiles) -> str:
    """Put `bundle` in `cache_dir/bundle.name` on the host unless already there; the folder's absolute path.

    `hash_files` hashes host files on the host: what is reused must match, what is written must arrive whole.
    """
    folder = posixpath.join(cache_dir, bundle.name)
    temporaries: dict[str, str] = {}
    try:
        folder = posixpath.join(sftp.normalize("."), folder)
        targets = {posixpath.join(folder, name): data for name, data in sorted(bundle.files.items())}
        expected = {target: hashlib.sha256(data).hexdigest() for target, data in targets.items()}
        sized = [t for t, data in targets.items() if (found := _stat(sftp, t)) is not None
                 and found.st_size == len(data)]
        reused = hash_files(sized) if sized else {}
        for target in sized:
            if reused[target] != expected[target]:
                log.warning("%s: %s on the host had changed since it was uploaded; uploading it again", label, target)
        for target, data in targets.items():
            if reused.get(target) != expected[target]:
                temporaries[target] = _write(sftp, target, data, label)
        written = hash_files(list(temporaries.values())) if temporaries else {}
        for target, temporary in temporaries.items():
            if written[temporary] != expected[target]:
                raise BackendError(f"{label}: {target} arrived changed on the host (SHA-256 differs); check the "
                                   "host's disk, or choose another remote cache folder")
        for target, temporary in list(temporaries.items()):
            sftp.posix_rename(temporary, target)
            del temporaries[target]
    except TIMEOUTS:
        temporaries.clear()  # nothing more can be asked of that host
        raise BackendError(f"{label}: the host stopped answering while SegScope uploaded to {folder}; check the "
                           "host (or raise --remote-timeout on a slow link)") from None
    except OSError as exc:
        raise BackendError(f"{label}: cannot upload to {folder} ({exc}); check the disk space and permissions "
                           "there, or choose another remote cache folder") from None
    finally:
        for temporary in temporaries.values():
            _remove(sftp, temporary)
    return folder
