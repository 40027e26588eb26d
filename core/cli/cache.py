"""`segscope cache info|clear`, and the cache options of the commands that decode inputs.

    segscope cache info [--json]     where the cache is, its entries and size against the cap, kept models
    segscope cache clear             remove the decoded inputs and the models kept there
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import TextIO

from ..cache import settings
from ..cache.decoded import IMAGE, TRUTH
from ..cache.outputs import OUTPUTS
from ..errors import SegScopeError
from .options import checked

#: What `--cache-size` accepts: a positive number of GiB.
cache_size = checked(float, lambda v: v > 0, "a positive number of GiB")


def _add_folder_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-dir", type=Path, metavar="DIR", default=None,
                        help="keep decoded inputs (each image's ROI, each truth mask's ROI) and int8 models in "
                             "DIR (default: $SEGSCOPE_CACHE_DIR, else the user cache folder, ~/.cache/segscope "
                             "on Linux); entries are keyed by the file's content, so a changed file is decoded "
                             "again")


def add_cache_options(parser: argparse.ArgumentParser) -> None:
    _add_folder_option(parser)
    parser.add_argument("--no-cache", action="store_true",
                        help="decode every input, make the int8 model anew and run the precision check's fp32 "
                             "model (nothing read from or written to the cache)")
    parser.add_argument("--cache-size", type=cache_size, metavar="GIB", default=None,
                        help=f"the decoded inputs' size cap in GiB; the least recently used are evicted "
                             f"(default {settings.DEFAULT_SIZE_GB:g}, or $SEGSCOPE_CACHE_SIZE_GB)")


def apply_cache_options(args: argparse.Namespace) -> None:
    """This process's cache as the options say (before any input is decoded)."""
    settings.configure(args.cache_dir, not args.no_cache, args.cache_size)


class CacheReport:
    """The run's one line on what came from the cache: the lookups made after it was created."""

    def __init__(self) -> None:
        self.store = settings.decoded_store()
        self.since = self.store.mark() if self.store is not None else 0

    def line(self, images: int | None = None) -> str | None:
        """The line, or None without a cache; `images`: how many the run read, so images with the same content
        (one entry, looked up by content) are said to be counted once."""
        if self.store is None:
            return None
        use = self.store.use(self.since)
        if IMAGE not in use:
            return None
        hits, total = use[IMAGE]
        masks = f" and {use[TRUTH][0]} of {use[TRUTH][1]} truth masks" if TRUTH in use else ""
        checked = f" (and {use[OUTPUTS][0]} of {use[OUTPUTS][1]} fp32 check results)" if OUTPUTS in use else ""
        rest = "" if hits == total else "; the others were decoded and stored for the next run"
        repeats = images - total if images is not None and images > total else 0
        distinct = " distinct" if repeats else ""
        same = (f"; the run read {images} images: {repeats} with the same content as another (one cache entry "
                "for both)") if repeats else ""
        return (f"{hits} of {total}{distinct} images{masks} came from the decoded-input cache ({self.store.folder})"
                f"{checked}{rest}{same}")


def _folder_size(folder: Path) -> tuple[int, int]:
    """(files, bytes) in `folder` and below."""
    files = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    return len(files), sum(p.stat().st_size for p in files)


#: `segscope cache`'s actions and what each does.
ACTIONS = {"info": "where the cache is, its entries and size against the cap, kept models",
           "clear": "remove the decoded inputs and the models kept there"}


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ..cache.store import UNUSABLE, EntryStore

    if args.action is None:
        raise SegScopeError("segscope cache needs an action: " + "; ".join(
            f"`segscope cache {name}`: {what}" for name, what in ACTIONS.items()))

    settings.configure(args.cache_dir)
    folder = settings.current().folder
    decoded = folder / settings.DECODED
    try:
        store = EntryStore(decoded, settings.current().size_bytes)
    except UNUSABLE as exc:
        if args.action != "clear" or not decoded.is_dir():
            raise SegScopeError(f"{decoded}: cannot open the cache ({getattr(exc, 'strerror', None) or exc}); "
                                "`segscope cache clear` empties a damaged one, or pass --cache-dir") from None
        shutil.rmtree(decoded, ignore_errors=True)  # its index is damaged: the folder goes as a whole
        store = EntryStore(decoded, settings.current().size_bytes)
    try:
        kept = {name: _folder_size(folder / name) for name in (settings.INT8, settings.OPENVINO)}
        if args.action == "clear":
            removed = store.clear()
            for name in kept:
                shutil.rmtree(folder / name, ignore_errors=True)
            files, size = (sum(v[i] for v in kept.values()) for i in (0, 1))
            print(f"removed {removed} entries from {decoded} and {files} model files ({size / 1e6:.1f} MB) from "
                  f"{folder / settings.INT8} and {folder / settings.OPENVINO}", file=out)
            return 0
        info = store.info()
        document = {"folder": str(folder), "decoded": {"folder": str(decoded), "entries": info.entries,
                                                       "bytes": info.bytes, "size_limit": info.size_limit,
                                                       "stray_files": info.stray_files,
                                                       "stray_bytes": info.stray_bytes},
                    **{name: {"folder": str(folder / name), "files": files, "bytes": size}
                       for name, (files, size) in kept.items()}}
        if args.json:
            json.dump(document, out, indent=2)
            out.write("\n")
            return 0
        print(f"cache: {folder}", file=out)
        print(f"decoded inputs (and fp32 check results): {info.entries} entries, {info.bytes / 1e6:.1f} MB of "
              f"{info.size_limit / 1e6:.0f} MB (least recently used evicted beyond it)", file=out)
        if info.stray_files:
            print(f"  {info.stray_files} files of interrupted writes ({info.stray_bytes / 1e6:.1f} MB): removed "
                  "by `segscope cache clear`, or by a run once an hour old", file=out)
        for name, what in ((settings.INT8, "int8 models"), (settings.OPENVINO, "OpenVINO's compiled models")):
            files, size = kept[name]
            print(f"{what}: {files} file{'s' * (files != 1)}, {size / 1e6:.1f} MB", file=out)
        return 0
    finally:
        store.close()


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("cache", help="the decoded-input cache: where it is, its size; clear it")
    parser.add_argument("action", choices=tuple(ACTIONS), nargs="?", default=None,
                        help="; ".join(f"{name}: {what}" for name, what in ACTIONS.items()))
    parser.add_argument("--json", action="store_true", help="info as one JSON document")
    _add_folder_option(parser)
    parser.set_defaults(handler=run)
