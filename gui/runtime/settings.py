"""What the viewer remembers between runs (QSettings): recent datasets, window layout, backend profile.

Passwords are never stored; a backend profile holds only host, port, user, key file and SDK path.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings

ORGANIZATION = "SegScope"
APPLICATION = "SegScope"
MAX_RECENT = 10


def settings() -> QSettings:
    return QSettings(ORGANIZATION, APPLICATION)


def recent_datasets() -> list[Path]:
    value = settings().value("recent/datasets", [])
    if isinstance(value, str):  # QSettings gives a bare string for a one-item list on some formats
        value = [value]
    return [Path(v) for v in value] if isinstance(value, list) else []


def add_recent_dataset(path: Path) -> list[Path]:
    """Put `path` first in the recent list (no duplicates, at most MAX_RECENT) and return the list."""
    path = Path(path).resolve()
    recent = [path] + [p for p in recent_datasets() if p != path]
    recent = recent[:MAX_RECENT]
    settings().setValue("recent/datasets", [str(p) for p in recent])
    return recent


def forget_recent_dataset(path: Path) -> list[Path]:
    """Drop `path` from the recent list (it did not open: only datasets that opened are remembered)."""
    path = Path(path).expanduser().resolve()
    recent = [p for p in recent_datasets() if p != path]
    settings().setValue("recent/datasets", [str(p) for p in recent])
    return recent


def backend_profile() -> dict[str, str]:
    s = settings()
    s.beginGroup("backend")
    try:
        return {k: str(s.value(k)) for k in s.childKeys()}
    finally:
        s.endGroup()


def save_backend_profile(profile: dict[str, str]) -> None:
    s = settings()
    s.remove("backend")
    s.beginGroup("backend")
    for k, v in profile.items():
        if k != "password":
            s.setValue(k, v)
    s.endGroup()
