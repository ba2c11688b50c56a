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


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError("constrfl.plot needs matplotlib: pip install constrfl[plot] "
                          "(or pip install matplotlib)") from err
    return plt


def _history(res):
    history = getattr(res, "history", None)
    if history is None:
        raise TypeError(f"expected a SolveResult (with .history), got {type(res).__name__}")
    if not history:
        raise ValueError(f"{getattr(res, 'method', 'the result')}: res.history is empty "
                         f"(status {getattr(res, 'status', '?')!r}); nothing to plot")
    return history


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
    return np.arange(1.0, len(history) + 1), "outer iterations (no communication rounds)"


def _gap(res, reference):
    """Objective gap per record, its formula and where F* came from: |F − F*|/|F*|
    (|F − F*| when F* = 0), F* = ``reference`` or, without one, the final objective
    (whose own record is then left out)."""
    obj = np.array([r["objective"] for r in _history(res)], dtype=float)
    given = reference is not None
    ref = float(reference) if given else float(obj[-1])
    if not np.isfinite(ref):
        raise ValueError(f"reference objective must be finite, got {ref!r}")
    formula = "|F − F*|/|F*|" if ref != 0 else "|F − F*|"
    source = (f"F* = {ref:.8g} (reference)" if given
              else f"F* = final objective {ref:.8g} (no reference given)")
    gap = np.abs(obj - ref) / (abs(ref) if ref != 0 else 1.0)
    if not given:
        gap[-1] = np.nan         # the reference itself: 0 by construction, not drawn
    return gap, formula, source


def _values(res, quantity, reference):
    if quantity == "gap":
        return _gap(res, reference)[0]
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown quantity {quantity!r}; choose from {tuple(QUANTITIES)}")
    return np.array([r[quantity] for r in _history(res)], dtype=float)


def _draw(ax, x, y, **style):
    """One log-scale line; values below FLOOR drawn at FLOOR.  Returns True if any was."""
    clipped = bool(np.any(y < FLOOR))
    style = {"marker": "." if len(x) <= 50 else None, **style}
    ax.semilogy(x, np.maximum(y, FLOOR), **style)
    return clipped


def _finish_axes(ax, xlabel, ylabel, clipped, target):
    if target is not None:
        ax.axhline(target, color="grey", ls=":", lw=1, label=f"target {target:g}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel + (f" (< {FLOOR:g} drawn at {FLOOR:g})" if clipped else ""))
    ax.grid(True, which="major", alpha=0.3)


def plot_result(res, ax=None, reference=None, *, x="auto", target=None, title=None):
    """Stationarity, feasibility and objective gap of one solve on one log-scale axes.

    Parameters
    ----------
    res : SolveResult
    ax : matplotlib Axes to draw on [a new figure].
    reference : the optimal objective F* for the gap |F − F*|/|F*|, e.g.
        ``cf.certify(problem, res).reference_objective``; without it the gap is taken
        to the final objective of ``res`` (its last record, 0 by construction, is not
        drawn; the legend says which F* was used).
    x : ``"auto"`` (communication rounds; outer iterations for a method without
        communication), ``"rounds"`` or ``"iterations"``.
    target : draw a dotted horizontal line at this value (e.g. the tolerance).
    title : [``"<method>: <status>"``].

    Returns the matplotlib Figure.
    """
    plt = _pyplot()
    xs, xlabel = _x(res, x)
    gap, formula, source = _gap(res, reference)
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.4), layout="constrained")
    clipped = False
    for y, label in ((_values(res, "stationarity", None), "stationarity"),
                     (_values(res, "feasibility", None), "feasibility"),
                     (gap, f"objective gap {formula}, {source}")):
        clipped |= _draw(ax, xs, y, label=label)
    _finish_axes(ax, xlabel, "residual / gap (log scale)", clipped, target)
    ax.set_title(title if title is not None else f"{res.method}: {res.status}")
    ax.legend(fontsize=8)
    return ax.figure


def compare(results, labels=None, reference=None, *, quantities=("stationarity",
            "feasibility", "gap"), x="auto", target=None, axes=None, styles=None,
            title=None):
    """Several solves on one figure: one log-scale panel per quantity, one line each.

    Parameters
    ----------
    results : sequence of SolveResult (e.g. one problem solved by several methods).
    labels : one legend label per result [``res.method``].
    reference : F* for the objective gap of every result (see :func:`plot_result`);
        without it each result's gap is taken to its own final objective.
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
    if reference is not None:
        _, formula, source = _gap(results[0], reference)
    else:
        formula, source = "|F − F*|/|F*|", "F* = each run's final objective (no reference given)"
    for ax, q in zip(axes, quantities):
        clipped = False
        for res, label, (xs, _), style in zip(results, labels, series, styles):
            clipped |= _draw(ax, xs, _values(res, q, reference), label=label,
                             **(style or {}))
        gap = q == "gap"
        _finish_axes(ax, series[0][1] + (f"\n{source}" if gap else ""),
                     QUANTITIES[q] + (f" {formula}" if gap else ""), clipped, target)
    axes[0].legend(fontsize=7, ncol=2 if len(results) > 6 else 1)
    return axes[0].figure
