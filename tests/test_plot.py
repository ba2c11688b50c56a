"""constrfl.plot: figures drawn from res.history, written to PNG."""
import sys
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest

import constrfl as cf
from constrfl.plot import compare, plot_result
from builders import np_problem

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(scope="module")
def solved():
    problem = np_problem(2, rows=200)
    return dict(fed=cf.solve(problem, method="fedproxal", inner="newton"),
                central=cf.solve(problem, method="cproxal"),
                avg=cf.solve(problem, method="fedavg", penalty="quadratic", rounds=30))


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def lines_by_label(ax):
    return {line.get_label(): line for line in ax.get_lines()}


def test_plot_result_png_axes_and_gap_data(solved, tmp_path):
    res = solved["fed"]
    ref = res.objective * (1 - 1e-3)
    fig = plot_result(res, reference=ref, target=1e-6)
    path = tmp_path / "result.png"
    fig.savefig(path)
    assert path.stat().st_size > 1000
    (ax,) = fig.axes
    assert ax.get_yscale() == "log"
    assert ax.get_xlabel() == "communication rounds"
    assert ax.get_title() == f"fedproxal: {res.status}"
    lines = lines_by_label(ax)
    gap_label = next(k for k in lines if k.startswith("objective gap"))
    assert "(reference)" in gap_label and "|F − F*|/|F*|" in gap_label
    assert {"stationarity", "feasibility", "target 1e-06"} <= set(lines)
    # the start (w⁰, measured with the first round) at round 0, then every outer iteration
    start = res.state["solver"].start
    rounds = [0] + [r["rounds"] for r in res.history]
    np.testing.assert_array_equal(lines["stationarity"].get_xdata(), rounds)
    assert lines["stationarity"].get_ydata()[0] == start["stationarity"]
    expected = [abs(r["objective"] - ref) / abs(ref) for r in [start] + res.history]
    np.testing.assert_allclose(lines[gap_label].get_ydata(), np.maximum(expected, 1e-12))
    assert ax.get_legend() is not None


def test_plot_result_without_reference_uses_final_objective(solved):
    res = solved["fed"]
    fig = plot_result(res)
    lines = lines_by_label(fig.axes[0])
    gap_label = next(k for k in lines if k.startswith("objective gap"))
    assert "final objective" in gap_label and "no reference given" in gap_label
    gap = lines[gap_label].get_ydata()
    assert gap[-1] == 1e-12               # the reference itself: 0, drawn at the floor
    assert len(gap) == len(lines["stationarity"].get_xdata())      # to the last record
    start = res.state["solver"].start
    assert gap[0] == pytest.approx(abs(start["objective"] - res.objective)
                                   / abs(res.objective))


def test_centralized_result_falls_back_to_outer_iterations(solved):
    res = solved["central"]
    assert res.rounds == 0
    ax = plot_result(res).axes[0]
    assert ax.get_xlabel().startswith("outer iterations")
    np.testing.assert_array_equal(ax.get_lines()[0].get_xdata(),
                                  np.arange(0, len(res.history) + 1))     # w⁰ at 0
    with pytest.raises(ValueError, match="x='iterations'"):
        plot_result(res, x="rounds")


def test_plot_result_draws_into_given_axes(solved):
    fig, (left, right) = plt.subplots(1, 2)
    assert plot_result(solved["avg"], ax=right) is fig
    assert not left.get_lines() and len(right.get_lines()) == 3


def test_compare_one_panel_per_quantity(solved, tmp_path):
    results = [solved["fed"], solved["avg"]]
    fig = compare(results, ["fedproxal", "fedavg γ=100"], reference=solved["fed"].objective,
                  target=1e-4, title="NP")
    path = tmp_path / "compare.png"
    fig.savefig(path)
    assert path.stat().st_size > 1000
    assert len(fig.axes) == 3
    for ax, word in zip(fig.axes, ("stationarity", "feasibility", "objective gap")):
        assert ax.get_yscale() == "log"
        assert ax.get_ylabel().startswith(word)
        assert ax.get_xlabel().startswith("communication rounds")
        assert set(lines_by_label(ax)) == {"fedproxal", "fedavg γ=100", "target 0.0001"}
    assert "(reference)" in fig.axes[2].get_xlabel()
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend[:2] == ["fedproxal", "fedavg γ=100"]
    avg = lines_by_label(fig.axes[1])["fedavg γ=100"]
    np.testing.assert_array_equal(avg.get_xdata(), np.arange(1, 31))


def test_compare_axes_kinds_and_errors(solved):
    fed, central = solved["fed"], solved["central"]
    with pytest.raises(ValueError, match="cproxal"):
        compare([fed, central])
    fig = compare([fed, central], x="iterations", quantities=["gap"])
    assert len(fig.axes) == 1 and fig.axes[0].get_xlabel().startswith("outer iterations")
    with pytest.raises(ValueError, match="2 results but 1 labels"):
        compare([fed, central], ["one"], x="iterations")
    with pytest.raises(ValueError, match="unknown quantity"):
        compare([fed], quantities=["speed"])
    _, axes = plt.subplots(1, 2)
    with pytest.raises(ValueError, match="3 quantities but 2 axes"):
        compare([fed], axes=axes)


def test_empty_history_and_missing_matplotlib(solved, monkeypatch):
    res = solved["fed"]
    empty = cf.SolveResult(**{**vars(res), "history": []})
    with pytest.raises(ValueError, match="history is empty"):
        plot_result(empty)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"pip install constrfl\[plot\]"):
        plot_result(res)


# -- compare on synthetic histories: labels inside, divergence, coinciding lines, F* --------

def run(stationarity, feasibility, objective, method="m"):
    """A stand-in for a SolveResult: one record per round."""
    history = [dict(rounds=k + 1, stationarity=s, feasibility=f, objective=o)
               for k, (s, f, o) in enumerate(zip(stationarity, feasibility, objective))]
    return SimpleNamespace(history=history, method=method, status="optimal")


def decay(start, stop, n=30):
    return list(np.geomspace(start, stop, n))


def inside(fig, artist):
    box, frame = artist.get_window_extent(), fig.bbox
    return (box.x0 >= frame.x0 and box.y0 >= frame.y0 and box.x1 <= frame.x1
            and box.y1 <= frame.y1)


def test_axis_labels_stay_inside_the_figure():
    """A feasibility of 0 (drawn at the floor) lengthens that panel's y label."""
    a = run(decay(1, 1e-7), [0.0] * 30, decay(2, 1, 30))
    b = run(decay(1, 1e-5), decay(1e-1, 1e-9), decay(3, 1, 30))
    fig = compare([a, b], ["a", "b"])
    fig.canvas.draw()
    assert "drawn at" in fig.axes[1].get_ylabel()
    for ax in fig.axes:
        assert inside(fig, ax.yaxis.label) and inside(fig, ax.xaxis.label), ax.get_ylabel()


def test_a_diverged_run_does_not_squash_the_others(tmp_path):
    sane = [run(decay(1, 1e-7), decay(1, 1e-8), decay(2, 1)),
            run(decay(2, 1e-4), decay(1, 1e-6), decay(3, 1))]
    blown = run(decay(1, 1e42), decay(1, 1e40), decay(2, 1e40))
    fig = compare(sane + [blown], ["a", "b", "blown"])
    fig.savefig(tmp_path / "diverged.png")
    for ax in fig.axes:
        low, high = ax.get_ylim()
        assert 2 <= high <= 1e3, (ax.get_ylabel(), high)      # the sane runs' range
        labels = [line.get_label() for line in ax.get_lines()]
        assert labels[:2] == ["a", "b"] and labels[2].startswith("blown (diverged: max")
        exits = [line for line in ax.get_lines() if line.get_marker() == "^"]
        assert len(exits) == 1 and exits[0].get_ydata()[0] == high


def test_all_runs_diverging_keeps_the_full_range():
    fig = compare([run(decay(1, 1e42), decay(1, 1e40), decay(2, 1e40))] * 2, ["x", "y"])
    assert fig.axes[0].get_ylim()[1] >= 1e42


def test_coinciding_runs_stay_distinguishable():
    same = run(decay(1, 1e-7), decay(1, 1e-8), decay(2, 1))
    ax = compare([same, same, same], ["one", "two", "three"], quantities="stationarity").axes[0]
    lines = ax.get_lines()
    assert len({line.get_marker() for line in lines}) == 3
    assert len({line.get_linestyle() for line in lines}) == 3
    assert len({line.get_markevery()[0] for line in lines}) == 3      # staggered markers


def test_without_reference_the_gap_is_to_the_most_accurate_run():
    """F* is the final objective of the run with the least final residual, for every
    run; a penalty run that ends infeasible below F* does not set it."""
    exact = run(decay(1, 1e-8), decay(1, 1e-9), decay(2, 1.5), "fedproxal")
    penalty = run(decay(1, 1e-2), [0.1] * 30, decay(2, 1.1), "fedavg")
    ax = compare([penalty, exact], quantities="gap").axes[0]
    gaps = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
    expected = np.abs(np.geomspace(2, 1.1, 30) - 1.5) / 1.5
    np.testing.assert_allclose(gaps["fedavg"], np.maximum(expected, 1e-12))
    assert gaps["fedproxal"][-1] == 1e-12              # F* itself: 0, drawn at the floor
    assert "final objective of fedproxal" in ax.get_xlabel()
    assert "no reference given" in ax.get_xlabel()


def test_a_diverged_runs_exit_mark_has_its_colour_on_axes_already_drawn_on():
    """The ▲ takes the colour of the diverged run's own line, not of the line at its
    index among the axes' lines (a panel may hold lines drawn before)."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.semilogy([1, 2], [1, 1], color="black")                       # drawn before
    sane = run(decay(1, 1e-7), decay(1, 1e-8), decay(2, 1))
    blown = run(decay(1, 1e42), decay(1, 1e40), decay(2, 1e40))
    compare([sane, blown], ["sane", "blown"], quantities="stationarity", axes=[ax],
            styles=[{"color": "tab:blue"}, {"color": "tab:red"}])
    exits = [line for line in ax.get_lines() if line.get_marker() == "^"]
    assert [line.get_color() for line in exits] == ["tab:red"]
    plt.close(fig)
