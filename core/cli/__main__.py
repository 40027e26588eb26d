"""`python -m segscope.core.cli ...`: the `segscope` command."""

from __future__ import annotations

from . import run

if __name__ == "__main__":
    run()
