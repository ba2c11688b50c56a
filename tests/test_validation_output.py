"""validation/common.py: where the validation scripts write (--out-dir, --update-results,
--out), so that a run never overwrites the committed results by default."""
import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "validation"))
import common  # noqa: E402


def parse(argv):
    parser = common.add_output_args(argparse.ArgumentParser(), "table9.md")
    return common.output_path(parser.parse_args(argv))


def test_default_is_outside_the_committed_results():
    path = parse([])
    assert path == common.OUT / "table9.md"
    assert common.RESULTS not in path.parents


def test_update_results_out_dir_and_out(tmp_path):
    assert parse(["--update-results"]) == common.RESULTS / "table9.md"
    assert parse(["--out-dir", str(tmp_path)]) == tmp_path / "table9.md"
    assert parse(["--out", str(tmp_path / "x.md")]) == tmp_path / "x.md"


def test_output_options_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as info:
        parse(["--update-results", "--out-dir", "somewhere"])
    assert info.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_out_dir_is_ignored_by_git():
    ignore = (Path(__file__).resolve().parents[1] / ".gitignore").read_text().split()
    assert "validation/out/" in ignore


def test_bench_highdim_quick_writes_its_table(tmp_path):
    """bench.py --highdim --quick: one tiny row (ours and Clarabel) in this process,
    written as bench_highdim.md; the full run's case list without solving it."""
    import bench
    rows = bench.main(["--highdim", "--quick", "--out-dir", str(tmp_path)])
    text = (tmp_path / "bench_highdim.md").read_text()
    assert "| up KB: mean / max (entries·d) |" in text and "peak MB" in text
    assert [r[1].split(" (")[0] for r in rows] == ["cvxpy/Clarabel", "defaults"]
    assert all(r[2] == "optimal" for r in rows), rows
    cases = {name: [label for label, _ in solvers]
             for name, _, _, solvers in bench.hd_cases()}
    assert len(cases) == 3 + 2 + 4 + 1 + 1 + 1
    assert cases["NP sparse d=5,000 (1% nonzeros), 10 x 500 rows, L1 1e-3"] == [
        "defaults", "private=False"]
    huge = "NP sparse d=1,000,000 (0.01% nonzeros), 20 x 5,000 rows, L1 1e-3"
    assert cases[huge] == ["defaults"]
    for d in ("2,000", "5,000"):
        assert cases[f"NP dense d={d}, 20 x 200 rows, L1 1e-3"] == [
            "defaults", 'inner="admm"', "private=False"]
    cg = [name for name, labels in cases.items() if 'inner="newton-cg"' in labels]
    assert len(cg) == 3 + 2 and all("ridge" in name for name in cg)
    assert all("private=False" in labels for name, labels in cases.items() if name != huge)
    # inner="auto" picks the compact Hessians on the first dense case (the others take
    # long to build; bench_highdim.md records each row's choice)
    assert bench._auto(bench.hd_cases()[0][1], private=False) == "newton-basis"
    assert bench._auto(bench.hd_cases()[0][1]) == "newton"


def test_build_scale_writes_its_table(tmp_path):
    """validation/build_scale.py at a small size: building and solving timed, in their
    own process, written as a table."""
    import build_scale
    out = tmp_path / "build_scale.md"
    build_scale.main(["--clients", "40", "--out", str(out)])
    text = out.read_text()
    assert "| clients | build s | solve s | build / solve |" in text and "| 40 |" in text
    assert "| optimal |" in text


def test_primal_dual_sweep_writes_its_table(tmp_path):
    """primal_dual.py on a two-problem sweep: a row per θ with its rounds and the ratio
    to θ = 0 (1 at θ = 0), each problem's rounds, and θ restored afterwards."""
    pytest.importorskip("sklearn")
    import primal_dual
    from constrfl import augmented
    theta = augmented.PRIMAL_DUAL_SHARE
    sys_argv, sys.argv = sys.argv, ["primal_dual.py", "--seeds", "1", "--problems", "2",
                                    "--thetas", "0,0.75", "--out", str(tmp_path / "pd.md")]
    try:
        primal_dual.main()
    finally:
        sys.argv = sys_argv
    assert augmented.PRIMAL_DUAL_SHARE == theta
    text = (tmp_path / "pd.md").read_text()
    assert "| 1 | 0 |" in text and "| 1.000 | 0 | 0 | 0 |" in text and "| 1 | 0.75 |" in text
    assert "| seed | problem | θ = 0 | θ = 0.75 |" in text
