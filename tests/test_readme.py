"""The README's examples run as written, each on its own (a fresh namespace: a reader
may copy any one of them), and print what the README says they print."""
import importlib.util
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 2
    flower = importlib.util.find_spec("flwr") is not None
    for code in blocks:
        if "constrfl.flower" in code and not flower:     # the extra is not installed
            continue
        exec(compile(code, str(README), "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("optimal")
    assert "optimal True True" in out            # saved, loaded, resumed: bit-identical
    assert "\nTrue\n" in out                      # the fitted estimator certified by cvxpy
    assert "simulate equals solve: True" in out or not flower
