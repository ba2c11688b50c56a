"""Convergence plots of :class:`~constrfl.result.SolveResult` s (extra ``plot``).

* :func:`plot_result`: one solve, its stationarity, feasibility and objective gap
  against communication rounds, on one log-scale axes.
* :func:`compare`: several solves, one panel per quantity, one line per solve.

The values come from ``res.history`` (one record per outer iteration of ``fedproxal``
and ``cproxal``, one per round of a baseline), whose records carry ``rounds``,
``stationarity``, ``feasibility`` and ``objective``.  ``cproxal`` does not communicate
(its ``rounds`` are 0): it is drawn against outer iterations, and the axis says so.

matplotlib is imported on first use (``pip install constrfl[plot]``); figures are made
with pyplot, so ``plt.show()`` and ``plt.close(fig)`` apply to them.
"""
from __future__ import annotations

import textwrap

import numpy as np

__all__ = ["plot_result", "compare", "QUANTITIES"]

#: What each panel can show: history key (or ``"gap"``) → axis label.
QUANTITIES = {
    "stationarity": "stationarity dist∞(0, ∂ℓ)",
    "feasibility": "feasibility max(‖[c]₊‖∞, ‖h‖∞)",
    "gap": "objective gap",
}
X_AXES = ("auto", "rounds", "iterations")
FLOOR = 1e-12     # zeros cannot be drawn on a log scale: values below are drawn here
#: A line whose values exceed BLOWUP × the largest first value of the panel's lines
#: (or are inf) has diverged: the axis is clipped to the other lines' range.
BLOWUP = 1e6
#: One marker shape and line style per line, so that coinciding lines stay visible
#: (▲ is kept for where a diverged line leaves the axes).
MARKERS = "osDvp<>hX*"
LINESTYLES = ("-", "--", "-.", ":")
LABEL_WIDTH = 42  # characters per line of an axis label (longer labels are wrapped)


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError("constrfl.plot needs matplotlib: pip install constrfl[plot] "
                          "(or pip install matplotlib)") from err
    return plt


def _history(res):
    """The records to draw: the start (the residuals and objective at w⁰, measured with
    the first round, where the solver state keeps them), then ``res.history``."""
    history = getattr(res, "history", None)
    if history is None:
        raise TypeError(f"expected a SolveResult (with .history), got {type(res).__name__}")
    if not history:
        raise ValueError(f"{getattr(res, 'method', 'the result')}: res.history is empty "
                         f"(status {getattr(res, 'status', '?')!r}); nothing to plot")
    start = getattr((getattr(res, "state", None) or {}).get("solver"), "start", None)
    return ([dict(start, rounds=0, start=True)] if start else []) + list(history)


def _x(res, x):
    """The x values and axis label of one result: cumulative communication rounds, or
    outer iterations (rounds for a baseline) when ``x="iterations"`` or, with
    ``x="auto"``, when the method did not communicate."""
    if x not in X_AXES:
        raise ValueError(f"x must be one of {X_AXES}, got {x!r}")
    history = _history(res)
    rounds = np.array([r.get("rounds", 0) for r in history], dtype=float)
    if x == "rounds" and not rounds.any():
        raise ValueError(f"{res.method}: no communication rounds recorded (a centralized "
                         "method); use x='iterations'")
    if x == "rounds" or (x == "auto" and rounds.any()):
        return rounds, "communication rounds"
    first = 0.0 if history[0].get("start") else 1.0
    return (np.arange(first, first + len(history)),
            "outer iterations (no communication rounds)")


def _record(res, key):
    return np.array([r[key] for r in _history(res)], dtype=float)


def _most_accurate(results):
    """Index of the result whose last record has the least max(stationarity,
    feasibility) (NaN counts as inf)."""
    final = [max(_record(r, "stationarity")[-1], _record(r, "feasibility")[-1])
             for r in results]
    return int(np.argmin(np.nan_to_num(final, nan=np.inf)))


def _reference(results, labels, reference):
    """``(F*, where it came from)``: ``reference`` or, without one, the final objective
    of the most accurate result (its own last gap is then 0).  The best objective is not
    the least one: a run that violates the constraints can end below F*."""
    if reference is not None:
        ref = float(reference)
        source = f"F* = {ref:.8g} (reference)"
    else:
        best = _most_accurate(results)
        ref = float(_record(results[best], "objective")[-1])
        source = (f"F* = final objective {ref:.8g} (no reference given)" if len(results) == 1
                  else f"F* = {ref:.8g}, the final objective of {labels[best]}, the run "
                       "with the least final residual (no reference given)")
    if not np.isfinite(ref):
        raise ValueError(f"reference objective must be finite, got {ref!r}")
    return ref, source


def _gap(res, ref):
    """|F − F*|/|F*| per record (|F − F*| when F* = 0); where F* is the result's own
    final objective its last gap is 0 exactly (drawn at FLOOR, as every value below it:
    the line reaches the last record like the residuals')."""
    return np.abs(_record(res, "objective") - ref) / (abs(ref) if ref != 0 else 1.0)


def _formula(ref):
    return "|F − F*|/|F*|" if ref != 0 else "|F − F*|"


def _look(i, n, length):
    """Line options of the i-th of n lines of ``length`` points: its own marker shape
    (hollow) and line style, markers staggered so that coinciding lines show both."""
    every = max(1, length // 10)
    return dict(marker=MARKERS[i % len(MARKERS)], fillstyle="none", markersize=5,
                ls=LINESTYLES[i % len(LINESTYLES)], markevery=(i * every // n, every))


def _diverged(ys):
    """Per line: inf somewhere, or above BLOWUP × the largest first finite value."""
    firsts = [y[np.isfinite(y)][0] for y in ys if np.isfinite(y).any()]
    limit = BLOWUP * max(max(firsts, default=FLOOR), FLOOR)
    return [bool(np.any(np.isinf(y)) or np.nanmax(y, initial=0.0) > limit) for y in ys]


def _panel(ax, xs, ys, labels, styles):
    """Lines on one log-scale axes; a diverged line (while others are sane) is cut at
    the top of the others' range, marked there with ▲ and its maximum, and labelled.
    Returns True if a value below FLOOR was drawn at FLOOR."""
    diverged = _diverged(ys)
    clip = any(diverged) and not all(diverged)
    lines = []
    for i, (x, y, label, style) in enumerate(zip(xs, ys, labels, styles)):
        if clip and diverged[i]:
            label += f" (diverged: max {np.nanmax(y):.1e}, off the axis)"
        lines += ax.semilogy(x, np.maximum(y, FLOOR), label=label,
                             **{**_look(i, len(ys), len(x)), **(style or {})})
    if clip:
        top = 10 * max(np.nanmax(np.maximum(y, FLOOR)) for y, d in zip(ys, diverged)
                       if not d)
        ax.set_ylim(top=top)
        for line, x, y, d in zip(lines, xs, ys, diverged):
            if d:
                _mark_exit(ax, line, x, y, top)
    return any(bool(np.any(y < FLOOR)) for y in ys)


def _mark_exit(ax, line, x, y, top):
    """▲ and the line's maximum where it leaves the axes through the top."""
    k = int(np.argmax(~(y <= top)))               # the first value above top (or NaN/inf)
    ax.plot([x[k]], [top], marker="^", color=line.get_color(), clip_on=False,
            ls="none", markersize=8)
    ax.annotate(f"max {np.nanmax(y):.1e}", (x[k], top), xytext=(4, -12),
                textcoords="offset points", color=line.get_color(), fontsize=7)


def _finish_axes(ax, xlabel, ylabel, clipped, target):
    if target is not None:
        ax.axhline(target, color="grey", ls=":", lw=1, label=f"target {target:g}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(textwrap.fill(ylabel + (f" (< {FLOOR:g} drawn at {FLOOR:g})"
                                          if clipped else ""), LABEL_WIDTH))
    ax.grid(True, which="major", alpha=0.3)


def plot_result(res, ax=None, reference=None, *, x="auto", target=None, title=None):
    """Stationarity, feasibility and objective gap of one solve on one log-scale axes.

    Parameters
    ----------
    res : SolveResult
    ax : matplotlib Axes to draw on [a new figure].
    reference : the optimal objective F* for the gap |F − F*|/|F*|, e.g.
        ``cf.certify(problem, res).reference_objective``; without it the gap is taken
        to the final objective of ``res`` (its last record, 0 by construction, is drawn
        at the floor; the legend says which F* was used).
    x : ``"auto"`` (communication rounds; outer iterations for a method without
        communication), ``"rounds"`` or ``"iterations"``.
    target : draw a dotted horizontal line at this value (e.g. the tolerance).
    title : [``"<method>: <status>"``].

    Returns the matplotlib Figure.
    """
    plt = _pyplot()
    xs, xlabel = _x(res, x)
    ref, source = _reference([res], [res.method], reference)
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.4), layout="constrained")
    ys = [_record(res, "stationarity"), _record(res, "feasibility"),
          _gap(res, ref)]
    labels = ["stationarity", "feasibility", f"objective gap {_formula(ref)}, {source}"]
    clipped = _panel(ax, [xs] * 3, ys, labels, [None] * 3)
    _finish_axes(ax, xlabel, "residual / gap (log scale)", clipped, target)
    ax.set_title(title if title is not None else f"{res.method}: {res.status}")
    ax.legend(fontsize=8)
    return ax.figure


def compare(results, labels=None, reference=None, *, quantities=("stationarity",
            "feasibility", "gap"), x="auto", target=None, axes=None, styles=None,
            title=None):
    """Several solves on one figure: one log-scale panel per quantity, one line each.

    Every line has its own marker and line style (coinciding lines stay visible).  A
    line that diverges (values above ``BLOWUP`` × the largest first value, or inf)
    does not set the panel's range: the axis is clipped to the other lines, and the
    diverged line is marked ▲ where it leaves the axis, with its maximum.

    Parameters
    ----------
    results : sequence of SolveResult (e.g. one problem solved by several methods).
    labels : one legend label per result [``res.method``].
    reference : F* for the objective gap of every result (see :func:`plot_result`);
        without it F* is the final objective of the most accurate result (the least
        final max(stationarity, feasibility)), named in the gap panel's axis label.
    quantities : panels, from ``QUANTITIES``: ``"stationarity"``, ``"feasibility"``,
        ``"gap"`` [all three, in that order].
    x : as for :func:`plot_result`; every result must offer the same kind of axis
        (a centralized result among federated ones needs ``x="iterations"``).
    target : a dotted horizontal line on every panel.
    axes : one matplotlib Axes per quantity to draw on [a new figure, one row].
    styles : one dict of matplotlib line options per result (or None entries).
    title : the figure's title (when it creates the figure) [none].

    Returns the matplotlib Figure.
    """
    plt = _pyplot()
    results = list(results)
    if not results:
        raise ValueError("compare needs at least one result")
    labels = [r.method for r in results] if labels is None else list(labels)
    styles = [None] * len(results) if styles is None else list(styles)
    for name, seq in (("labels", labels), ("styles", styles)):
        if len(seq) != len(results):
            raise ValueError(f"{len(results)} results but {len(seq)} {name}")
    quantities = [quantities] if isinstance(quantities, str) else list(quantities)
    for q in quantities:
        if q not in QUANTITIES:
            raise ValueError(f"unknown quantity {q!r}; choose from {tuple(QUANTITIES)}")
    series = [_x(r, x) for r in results]
    kinds = {xlabel for _, xlabel in series}
    if len(kinds) > 1:
        flat = [lab for lab, (_, xl) in zip(labels, series) if xl != "communication rounds"]
        raise ValueError(f"{flat} did not communicate and cannot share a rounds axis with "
                         "the others; pass x='iterations' or compare them separately")
    if axes is None:
        fig, axes = plt.subplots(1, len(quantities), figsize=(5.2 * len(quantities), 4.2),
                                 squeeze=False, layout="constrained")
        axes = list(axes[0])
        if title:
            fig.suptitle(title)
    else:
        axes = list(np.atleast_1d(axes))
        if len(axes) != len(quantities):
            raise ValueError(f"{len(quantities)} quantities but {len(axes)} axes")
    ref, source = _reference(results, labels, reference)
    xs = [xv for xv, _ in series]
    for ax, q in zip(axes, quantities):
        gap = q == "gap"
        ys = ([_gap(r, ref) for r in results] if gap
              else [_record(r, q) for r in results])
        clipped = _panel(ax, xs, ys, labels, styles)
        _finish_axes(ax, series[0][1] + (f"\n{textwrap.fill(source, 60)}" if gap else ""),
                     QUANTITIES[q] + (f" {_formula(ref)}" if gap else ""), clipped, target)
    axes[0].legend(fontsize=7, ncol=2 if len(results) > 6 else 1)
    return axes[0].figure
