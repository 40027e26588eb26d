"""The `segscope` command: the GUI by default, and headless subcommands.

    segscope [DATASET]                 open the viewer (on the demo dataset when none is given)
    segscope eval --dataset DIR        evaluate a dataset like the original script, plus hard metrics
    segscope demo DIR                  write the demo dataset
    segscope compare REF.npy CAND.npy  accuracy comparison of two tensors, with a pass/fail line
    segscope check PIPELINE...         valid for MindX? runs on the embedded backend?
    segscope card MODEL.onnx --out DIR a runnable project (card, pipeline, ATC files) from an ONNX model
    segscope profile / drift           operator profile and roofline; msit compare triage
    segscope report --dataset DIR --out R.html  one self-contained HTML report
    segscope review --dataset DIR      the disagreements of prediction and truth, likely label errors first;
                                       --against B: two runs compared, with a parity gate (exit 3 when it fails)
    segscope cache info|clear          the decoded-input cache: where, how large; empty it

Each subcommand is one module here with `register(subparsers)`, named once in `COMMANDS`; it sets its
`handler(args, out) -> exit code`. A command module imports at its top only what its parser needs; the handler
imports what the command runs (its run module: `eval_driver`, `report_run`, `profile_run`; or the core module it
drives), so building the parser, `--help` or a usage error never loads the commands' run code and libraries
(tests/core/test_cli_startup.py). Exit codes: 0 ok, 2 bad usage or bad input (one line on stderr), 1 internal
error (a bug), 3 a failed check: a FAIL verdict of `compare`, `review --against`'s parity gate (`EXIT_FAIL`).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import io
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO, Union

from ..errors import Refusals, SegScopeError, describe
from ..version import version_line
from . import cache, card, check, compare, demo, drift, gui, output, profile, report, review
from . import eval as evaluate

EXIT_INTERNAL, EXIT_INPUT = 1, 2
#: The subcommands in `segscope --help`'s order; `gui` first: the command without one runs it.
COMMANDS = (gui, evaluate, report, review, demo, compare, card, check, profile, drift, cache)


class _Version(argparse._VersionAction):
    """`--version`, its line looked up only when asked for (reading the package metadata takes ~25 ms)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        self.version = version_line()
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (the full usage is one `--help` away). Options only by their whole names: a prefix
    was taken for the one option it starts (`eval --out DIR` ran as `--output-scale DIR`, refused as a bad scale;
    `--out 0.5` would have run a whole-slide scale nobody asked for)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # the subcommands' parsers are made by this class too
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_INPUT, f"segscope: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="segscope", description="Inspect and correct U-Net segmentations "
                                     "from MindX SDK streams (embedded, Ascend host, or remote over SSH).",
                     epilog=f"Exit codes: 0 ok, {EXIT_INPUT} bad usage or bad input (one line on stderr), "
                            f"{EXIT_INTERNAL} internal error (a bug), {output.EXIT_FAIL} a failed check "
                            "(compare's FAIL verdict, review --against's parity gate).")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors (anywhere on "
                                                             "the command line)")
    parser.add_argument("--version", action=_Version,
                        help="print the version of SegScope (and of the Python running it) and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(commands)
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands `parser` has, by name."""
    return {name: p for a in parser._actions if isinstance(a, argparse._SubParsersAction)
            for name, p in a.choices.items()}


#: A value an option takes in Python (`command_options`): its text, a path, a number, a flag, a list (joined by ",").
OptionValue = Union[str, "os.PathLike[str]", int, float, bool, Sequence[str], None]


def command_options(command: str, options: dict[str, OptionValue]) -> argparse.Namespace:
    """`segscope COMMAND`'s options given by their names in Python (`max_pixels=...` for `--max-pixels`,
    `overlap=False` for `--no-overlap`; None: the default), read by the command's own parser: the same defaults,
    values and refusals as on the command line, a refusal as a one-line `SegScopeError` (the Python API's)."""
    parser = _subcommands(build_parser())[command]
    actions = {a.dest: a for a in parser._actions if a.option_strings and a.dest != "help"}
    argv = [command]
    for name, value in options.items():
        action = actions.get(name)
        if action is None:
            raise SegScopeError(f"{name}: not an option of segscope {command} (its options: {', '.join(actions)})")
        flag = action.option_strings[-1]
        if value is None or (action.nargs == 0 and value == action.default):
            continue
        if action.nargs == 0 and value != action.const:
            raise SegScopeError(f"{name}: expected {action.const!r} ({flag}) or {action.default!r}, got {value!r}")
        if action.nargs == 0:
            argv.append(flag)
        else:
            text = ",".join(value) if isinstance(value, (list, tuple)) else str(value)
            argv.append(f"{flag}={text}")
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return parser.parse_args(argv[1:])
    except SystemExit:
        raise SegScopeError(said.getvalue().strip().removeprefix("segscope: error: ")) from None


def _normalise_argv(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], bool]:
    """`--debug` taken out wherever it is, and `--opt -1,...` joined as `--opt=-1,...`: argparse would read a
    value starting with "-" as an option (only bare negative numbers are exempt)."""
    debug = "--debug" in argv[: argv.index("--")] if "--" in argv else "--debug" in argv
    argv = [a for a in argv if a != "--debug"] if debug else list(argv)
    parsers = [parser, *_subcommands(parser).values()]
    takes_value = {option for p in parsers for a in p._actions if a.nargs is None and a.option_strings
                   for option in a.option_strings}
    known = {option for p in parsers for option in p._option_string_actions}
    joined: list[str] = []
    for arg in argv:
        if joined and joined[-1] in takes_value and arg.startswith("-") and arg not in known and arg != "--":
            joined[-1] = f"{joined[-1]}={arg}"
        else:
            joined.append(arg)
    return joined, debug


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    argv, debug = _normalise_argv(parser, argv)
    if not argv or argv[0] not in {*_subcommands(parser), "-h", "--help", "--version"}:  # `segscope [DATASET]`
        argv = ["gui", *argv]
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the subcommand's parser, so the line points to the help that lists its options
        _subcommands(parser).get(argv[0], parser).error(f"unrecognized arguments: {' '.join(extra)}")
    output.install()  # notes and warnings wait for the first output: an error line comes alone
    try:
        code = args.handler(args, output.ReleasingOutput(out or sys.stdout, output.LINES))
        output.LINES.show()
        return code
    except KeyboardInterrupt:
        output.LINES.show()
        print("segscope: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `... | head -1`: the reader left; an export is all or nothing: none was published
        output.LINES.drop()
        with contextlib.suppress(OSError, ValueError):  # no second error when Python flushes stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("segscope: error: the standard output was closed by its reader (a pipe such as | head): stopped "
              "there; an export folder is left as it was", file=sys.stderr)
        return EXIT_INPUT
    except Exception as exc:  # a user error in its one line; a bug said so in one line, details on request
        output.LINES.drop()
        described = describe(exc)
        if not described.bug:
            for line in exc.lines if isinstance(exc, Refusals) and len(exc.lines) > 1 else ():
                print(f"segscope: error: {line}", file=sys.stderr)
            print(f"segscope: error: {described.line}", file=sys.stderr)
            return EXIT_INPUT
        print(f"segscope: internal error: {described.line} (a bug; rerun with --debug for details and report it)",
              file=sys.stderr)
        if debug:
            print(described.details, end="", file=sys.stderr)
        return EXIT_INTERNAL


def run() -> NoReturn:
    """The `segscope` command: `main`, then the exit. A headless command's process ends without Python tearing its
    modules down one by one (~0.1-0.15 s of OpenVINO's and ONNX Runtime's, a repeat eval's whole image or two)
    once what is registered to run at exit (logging's flush, the MindX SDK's release of its devices) has run and
    the output is flushed; a process that loaded Qt (the viewer) ends as usual, so Qt's objects write their
    settings."""
    code = main()
    if "PySide6" in sys.modules:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # (a reader that left: main said so)
            stream.flush()
    os._exit(code)
