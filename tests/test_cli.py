"""The console script: --version, --help, usage errors (exit 2, no traceback), the demo."""
import subprocess
import sys

import pytest

import constrfl
from constrfl import demo
from constrfl.cli import main


def exit_code(argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code


def test_version(capsys):
    assert exit_code(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"constrfl {constrfl.__version__}"


def test_python_m_constrfl_version():
    out = subprocess.run([sys.executable, "-m", "constrfl", "--version"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"constrfl {constrfl.__version__}"


def test_help_texts(capsys):
    assert exit_code(["--help"]) == 0
    top = capsys.readouterr().out
    assert "usage: constrfl" in top and "demo" in top and "--version" in top
    assert exit_code(["demo", "--help"]) == 0
    text = capsys.readouterr().out
    for option in ("--clients", "--samples", "--max-class1-loss", "--tol", "--seed"):
        assert option in text
    assert "default: 5" in text and "Neyman-Pearson" in text


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "usage: constrfl" in capsys.readouterr().err


@pytest.mark.parametrize("argv, option", [
    (["--clients", "0"], "--clients"),
    (["--clients", "two"], "--clients"),
    (["--samples", "-5"], "--samples"),
    (["--tol", "0"], "--tol"),
    (["--tol", "-1e-6"], "--tol"),
    (["--tol", "nan"], "--tol"),
    (["--max-class1-loss", "0"], "--max-class1-loss"),
    (["--max-class1-loss", "inf"], "--max-class1-loss"),
    (["--seed", "-1"], "--seed"),
    (["--samples", "4", "--clients", "3"], "--samples"),    # a client without class 1
    (["--samples", "10", "--clients", "11"], "--clients"),
])
def test_invalid_demo_values_are_usage_errors(argv, option, capsys):
    assert exit_code(["demo", *argv]) == 2
    err = capsys.readouterr().err
    assert f"error: argument {option}" in err and "Traceback" not in err


def test_unknown_command(capsys):
    assert exit_code(["train"]) == 2
    assert "invalid choice: 'train'" in capsys.readouterr().err


def test_demo_runs_and_certifies(capsys):
    assert main(["demo", "--clients", "2", "--samples", "120"]) == 0
    out = capsys.readouterr().out
    assert "2 clients" in out and "status='optimal'" in out and "cvxpy" in out


def test_python_m_constrfl_demo_checks_its_options(capsys):
    with pytest.raises(SystemExit) as info:
        demo.main(["--clients", "0"])
    assert info.value.code == 2
    assert "argument --clients" in capsys.readouterr().err


@pytest.mark.parametrize("argv, unknown, usage", [
    (["demo", "--bogus"], "--bogus", "usage: constrfl demo"),   # the demo's options
    (["demo", "extra"], "extra", "usage: constrfl demo"),
    (["--bogus", "demo"], "--bogus", "usage: constrfl [-h]"),   # a top-level unknown
])
def test_unknown_arguments_show_their_commands_usage(argv, unknown, usage, capsys):
    assert exit_code(argv) == 2
    err = capsys.readouterr().err
    assert usage in err and f"unrecognized arguments: {unknown}" in err
