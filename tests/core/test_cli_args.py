"""The command line's arguments: one line for every bad value, flags that mean what they say, strict JSON."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from segscope.core import cli
from segscope.core.cli import compare as compare_cli


def one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("segscope: error: "), err
    return err


@pytest.mark.parametrize("argv, named", [
    (["eval"], "--dataset"),
    (["eval", "--dataset", "d", "--max-pixels", "abc"], "--max-pixels"),
    (["eval", "--dataset", "d", "--max-pixels", "0"], "--max-pixels"),
    (["eval", "--dataset", "d", "--backend", "gpu"], "--backend"),
    (["eval", "--dataset", "d", "--bogus"], "--bogus"),
    (["demo", "d", "--count", "-1"], "--count"),
    (["compare", "a.npy"], "candidate"),
])
def test_usage_errors_are_one_line(capsys, argv, named):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    err = one_line(capsys.readouterr().err)
    assert named in err and "--help" in err


def test_a_value_starting_with_a_minus_is_a_value(tiny_model_project, small_dataset, capsys):
    code = cli.main(["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline),
                     "--roi", "-1,0,10,10"])
    assert code == 2
    assert "--roi" in one_line(capsys.readouterr().err)  # the ROI's own check, not argparse's usage


def test_an_empty_roi_is_refused(tiny_model_project, small_dataset, capsys):
    code = cli.main(["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline),
                     "--roi", ""])
    assert code == 2 and "--roi: expected four integers" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize("option", [["--set-env", "/opt/set_env.sh"], ["--probabilities", "uint8"],
                                    ["--remote-python", "/usr/bin/python3"], ["--accept-new-host-key"],
                                    ["--remote-timeout", "30"]])
def test_remote_options_without_remote_are_refused(tiny_model_project, small_dataset, capsys, option):
    code = cli.main(["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline),
                     *option])
    assert code == 2
    assert f"{option[0]}: only applies with --remote" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize("value", ["0", "-5", "inf", "nan", "soon"])
def test_a_remote_timeout_must_be_a_positive_number_of_seconds(tiny_model_project, small_dataset, capsys, value):
    with pytest.raises(SystemExit) as info:
        cli.main(["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline),
                  "--remote", "host", "--remote-timeout", value])
    assert info.value.code == 2
    error = one_line(capsys.readouterr().err)
    assert f"--remote-timeout: expected a positive number of seconds, got '{value}'" in error


@pytest.mark.parametrize("where", ["first", "last"])
def test_debug_anywhere(tmp_path, capsys, monkeypatch, where):
    np.save(tmp_path / "a.npy", np.ones(3))

    def broken(a, b):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(compare_cli, "compare_tensors", broken)
    argv = ["compare", str(tmp_path / "a.npy"), str(tmp_path / "a.npy")]
    argv = ["--debug", *argv] if where == "first" else [*argv, "--debug"]
    assert cli.main(argv) == 1
    assert "Traceback" in capsys.readouterr().err


def strict_json(text: str) -> object:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_compare_json_is_strict_json(tmp_path, capsys):
    np.save(tmp_path / "zero.npy", np.zeros(4, np.float32))
    np.save(tmp_path / "one.npy", np.ones(4, np.float32))
    np.save(tmp_path / "nan.npy", np.array([1.0, np.nan, 2.0, 3.0], np.float32))
    out = io.StringIO()
    assert cli.main(["compare", str(tmp_path / "zero.npy"), str(tmp_path / "one.npy"), "--json"], out) == 3  # FAIL
    document = strict_json(out.getvalue())
    assert document["relative_euclidean_distance"] == "inf"  # infinite (|a - b| / |a| with a = 0), not n/a
    assert document["max_absolute_error"] == 1.0
    out = io.StringIO()
    assert cli.main(["compare", str(tmp_path / "nan.npy"), str(tmp_path / "one.npy"), "--json"], out) == 3  # NaN
    assert strict_json(out.getvalue())["cosine_similarity"] is None  # NaN: n/a


def test_an_npy_header_claiming_more_than_the_file_holds(tmp_path, capsys):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }"
    header += " " * (118 - len(header)) + "\n"
    (tmp_path / "huge.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
                                        + b"\0" * 64)
    np.save(tmp_path / "a.npy", np.zeros(4, np.float32))
    assert cli.main(["compare", str(tmp_path / "huge.npy"), str(tmp_path / "a.npy")]) == 2
    err = one_line(capsys.readouterr().err)
    assert str(tmp_path / "huge.npy") in err and "(1000000, 1000000)" in err and "truncated" in err


def test_no_display_gives_a_hint_not_an_abort(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    done = subprocess.run([sys.executable, "-m", "segscope.core.cli", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    if not sys.platform.startswith("linux"):
        pytest.skip("the display check is for Linux (X11 / Wayland)")
    assert done.returncode == 2
    err = one_line(done.stderr)
    assert "no display" in err and "Xvfb" in err and "segscope eval" in err


def test_a_mistyped_command_is_one_line_not_the_viewer(capsys):
    assert cli.main(["evl"]) == 2
    err = one_line(capsys.readouterr().err)
    assert err.startswith("segscope: error: evl: neither a dataset folder nor a segscope command")


@pytest.mark.parametrize("name", ["gui", "eval", "report", "demo", "compare", "card", "check", "profile", "drift"])
def test_every_subcommand_is_reached_by_its_name(capsys, name):
    with pytest.raises(SystemExit) as info:
        cli.main([name, "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: segscope {name} ")


def test_a_newly_registered_subcommand_is_run_not_sent_to_the_viewer(monkeypatch, capsys):
    """The subcommands come from the parser: one `register` adds a command (no second list to forget)."""
    class Hello:
        @staticmethod
        def register(commands) -> None:
            command = commands.add_parser("hello")
            command.add_argument("name")
            command.set_defaults(handler=lambda args, out: print(f"hello {args.name}", file=out) or 0)

    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, Hello))
    out = io.StringIO()
    assert cli.main(["hello", "world"], out) == 0
    assert out.getvalue() == "hello world\n"
