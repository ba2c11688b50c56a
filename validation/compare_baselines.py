"""fedproxal against the federated baselines of the other seed papers (FedAvg, FedAvgM,
FedAdagrad/Yogi/Adam, FedCAda, FedMid, FedDualAvg and the OSP variants; docs/algorithms.md
§7) on Neyman-Pearson (30) and the federated Lasso.

Two problems, each solved by ``fedproxal`` and by every baseline method:

* Neyman-Pearson (30) on breast-cancer-wisconsin, n = 10 clients (stratified split),
  r = 0.2 — synthetic data from ``make_classification`` when the data set is absent.
  The baselines run on the quadratic penalty reformulation with γ ∈ {1e2, 1e4}.
* Federated Lasso (``constrfl.problems.federated_lasso``): no constraints, P = λ‖·‖₁.

Every baseline uses K = 10 local steps, full batches and full participation; its client
(and, for the adaptive methods, server) learning rate is the best of a small grid, tuned
on the first ``--tune-rounds`` rounds (see ``grid``); the best setting then runs the full
budget.  The table reports, against cvxpy's optimum F* of the original problem, the first
communication round at which the relative objective gap |F − F*|/|F*| ≤ 1e-4 and the max
constraint violation ≤ 1e-4 hold together ("not reached in R rounds" otherwise), and the
final gap and violation.  For fedproxal the measurements are its outer iterations (the
points where it certifies), at their cumulative round counts.

    python validation/compare_baselines.py            # ≈ 6 min
    python validation/compare_baselines.py --quick    # smoke run, shorter budgets

Writes ``baselines.md`` and, when matplotlib is installed (extra ``plot``), the figure
``baselines.png`` (drawn by ``constrfl.plot.compare``) into ``--out-dir`` (default
``validation/out/``, not committed); ``--update-results`` replaces the committed
``validation/results/baselines.md`` and ``.png``; ``--out FILE`` writes FILE and the
figure beside it (same name, ``.png``).
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))

import common as C                                               # noqa: E402
import constrfl as cf                                            # noqa: E402
from constrfl.api import BASELINES                               # noqa: E402
from constrfl.groundtruth import pooled_cvxpy                        # noqa: E402
from constrfl.problems import federated_lasso, neyman_pearson    # noqa: E402
from constrfl.problems.datasets import (load_breast_cancer_wisconsin,  # noqa: E402
                                        make_classification)
from constrfl.problems.partition import stratified_split        # noqa: E402
from constrfl.prox import Zero                                   # noqa: E402

TARGET = 1e-4                 # objective gap and violation to reach
K = 10                        # local steps of every baseline
ADAPTIVE = ("fedadagrad", "fedyogi", "fedadam")
PENALTIES = (1e2, 1e4)


# -- problems ------------------------------------------------------------------------------

def np_problem():
    """NP on breast-cancer-wisconsin (n = 10, r = 0.2), or on synthetic data."""
    folder = C.data_dir() / "breast-cancer-wisconsin"
    if folder.is_dir():
        data, label = load_breast_cancer_wisconsin(folder), "breast-cancer-wisconsin"
    else:
        data = make_classification(n_samples=700, n_features=9, seed=0)
        label = "synthetic (make_classification: breast-cancer-wisconsin not found)"
    ids = stratified_split(data.y, 10, seed=0)
    problem = neyman_pearson(data.X, data.y, ids, max_class1_loss=0.2)
    return problem, "Neyman-Pearson", f"Neyman-Pearson (30), {label}, n = 10 clients, r = 0.2"


def lasso_problem():
    kw = dict(n_clients=16, n_samples_per_client=64, dim=100, sparsity=10, noise=0.1,
              lam=0.05, seed=0)
    text = ", ".join(f"{k} = {v}" for k, v in kw.items())
    return federated_lasso(**kw), "federated Lasso", f"federated Lasso ({text})"


def optimum(problem):
    """cvxpy (Clarabel) optimum value of the pooled original problem and the largest
    multiplier μ* of its inequality constraints (0 without constraints)."""
    prob, _, owned = pooled_cvxpy(problem)
    prob.solve(solver="CLARABEL")
    duals = [float(np.max(c.dual_value)) for ineq, _ in owned.values() for c in ineq]
    return float(prob.value), max(duals, default=0.0)


# -- runs ----------------------------------------------------------------------------------

class Trace:
    """Gap and violation against communication rounds for one run."""

    def __init__(self, label, res, f_star, settings=""):
        self.label, self.res, self.settings = label, res, settings
        h = res.history
        self.rounds = np.array([r["rounds"] for r in h], dtype=float)
        self.gap = np.array([abs(r["objective"] - f_star) / abs(f_star) for r in h])
        self.violation = np.array([r["feasibility"] for r in h])

    def reached(self):
        """First round with gap ≤ TARGET and violation ≤ TARGET, or None."""
        ok = np.flatnonzero((self.gap <= TARGET) & (self.violation <= TARGET))
        return int(self.rounds[ok[0]]) if ok.size else None

    def final(self):
        """Max gap and violation over the last 10% of the records (at least one), so that
        an oscillating run is judged by its bad rounds, not its luckiest last one."""
        if not self.gap.size:
            return np.inf, np.inf
        tail = max(1, len(self.gap) // 10)
        return float(self.gap[-tail:].max()), float(self.violation[-tail:].max())

    def kept(self):
        """Whether gap and violation stay ≤ TARGET over the last 10% of the records."""
        return max(self.final()) <= TARGET

    def score(self):
        """Tuning order: reached first, then the smaller final max(gap, violation)."""
        hit = self.reached()
        worst = max(self.final())
        return (0, hit) if hit is not None else (1, worst if np.isfinite(worst) else np.inf)


def grid(method, gamma, n):
    """The settings tried for a baseline: client rates (per unit of the mean client
    objective, so ×n against F's) scaled to the penalty's curvature (n/γ for NP; the
    Lasso's clients have curvature ≈ 10/n), server rates for FedOpt."""
    if method == "fedcada":      # Adam steps ≈ η_c a coordinate at any scale: decay helps
        return [dict(client_lr=lr, client_lr_decay=decay) for lr in (1e-2, 1e-3)
                for decay in (1.0, 0.998)]
    scale = n * (1.0 / gamma if gamma else 0.03)
    if method in ADAPTIVE:
        return [dict(client_lr=s * scale, server_lr=eta) for s in (1.0, 0.1)
                for eta in (1.0, 0.1, 0.01)]
    return [dict(client_lr=s * scale) for s in (1.0, 0.3, 0.1)]


def run_baseline(problem, f_star, method, gamma, rounds, tune_rounds):
    """Tune on ``tune_rounds`` rounds, then run the best setting for ``rounds``."""
    penalty = dict(penalty="quadratic", penalty_weight=gamma) if gamma else {}
    best, best_score = None, None
    for options in grid(method, gamma, problem.n_clients):
        res = cf.solve(problem, method=method, rounds=tune_rounds, local_steps=K,
                       **penalty, **options)
        score = Trace("", res, f_star).score()
        if best_score is None or score < best_score:
            best, best_score = options, score
    res = cf.solve(problem, method=method, rounds=rounds, local_steps=K, **penalty, **best)
    label = method + (f" (γ = {gamma:.0e})" if gamma else "")
    return Trace(label, res, f_star, _settings(best))


def run_fedproxal(problem, f_star):
    res = cf.solve(problem, method="fedproxal", tol=1e-6)
    return Trace("fedproxal", res, f_star, "defaults, tol = 1e-6")


def _settings(options):
    return ", ".join(f"{k} = {v:.3g}" for k, v in options.items())


def compare(problem, penalties, rounds, tune_rounds, log):
    f_star, mu_max = optimum(problem)
    traces = [run_fedproxal(problem, f_star)]
    log(f"  fedproxal: {traces[0].res.status}, {traces[0].res.rounds} rounds")
    for gamma in penalties:
        for method in BASELINES:
            t0 = time.perf_counter()
            traces.append(run_baseline(problem, f_star, method, gamma, rounds, tune_rounds))
            log(f"  {traces[-1].label}: reached {traces[-1].reached()}, "
                f"final gap/violation {traces[-1].final()} "
                f"({time.perf_counter() - t0:.1f}s)")
    return f_star, mu_max, traces


# -- report --------------------------------------------------------------------------------

def table(traces, rounds):
    lines = ["| method | settings | rounds to gap ≤ 1e-4 and violation ≤ 1e-4 | final gap* "
             "| final max violation* | status |", "|---|---|---|---|---|---|"]
    for t in traces:
        hit = t.reached()
        budget = t.res.rounds if t.label == "fedproxal" else rounds
        cell = (f"not reached in {budget} rounds" if hit is None
                else str(hit) if t.kept() else f"{hit} (not kept to the end)")
        gap, viol = t.final()
        lines.append(f"| {t.label} | {t.settings} | {cell} | {gap:.1e} | {viol:.1e} "
                     f"| {t.res.status} |")
    return "\n".join(lines)


def markdown(sections, args, elapsed, plot_note):
    out = ["# fedproxal vs. the federated baselines", "",
           f"Generated by `{C.command_line()}` in {elapsed:.0f} s "
           f"(Python {platform.python_version()}, numpy {np.__version__}).", "",
           "Gap = |F(w) − F*| / |F*| against cvxpy's optimum of the original problem; "
           "violation = max(‖[c(w)]₊‖∞, ‖h(w)‖∞) of the original constraints. Baselines: "
           f"K = {K} local steps, full batches, full participation; rates tuned over the "
           "grid of `grid()` on the first "
           f"{args.tune_rounds} rounds (best = reaches the target first, else the smallest "
           "final max(gap, violation)); constrained problems run on the quadratic penalty "
           "F + γ/2‖[c]₊‖² with the γ shown. fedproxal: outer iterations of Algorithm 1 at "
           "their cumulative round counts (each ADMM iteration is one round).", ""]
    for _, title, problem, (f_star, mu_max, traces), rounds in sections:
        out += [f"## {title}", "", f"F* = {f_star:.10g}; baseline budget R = {rounds} "
                "rounds."]
        if mu_max > 0:
            out += ["", f"Largest multiplier μ* = {mu_max:.3g} (cvxpy): the penalty's "
                    "minimizer violates that constraint by about μ*/γ = "
                    + ", ".join(f"{mu_max / g:.1e} (γ = {g:.0e})" for g in PENALTIES) + "."]
        if isinstance(problem.regularizer, Zero):
            out += ["", "P = 0 here, so fedmid, feddualavg and their OSP variants run "
                    "exactly FedAvg's iterations (same rows)."]
        out += ["", table(traces, rounds), ""]
    out += ["\\* The largest value over the last 10% of the run's records (rounds; for "
            "fedproxal, outer iterations), so that oscillating runs are not judged by "
            "their luckiest last round.", "", plot_note, ""]
    return "\n".join(out)


def plot(sections, path):
    """Gap and violation against rounds (``constrfl.plot.compare``): fedproxal and each
    baseline's best penalty, one pair of panels per problem (no violation panel for an
    unconstrained one)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "No plot: matplotlib is not installed (`pip install constrfl[plot]`)."
    from constrfl.plot import compare as compare_plot
    panels = [(name, f_star, traces,
               ("gap", "feasibility") if any(t.violation.max(initial=0) > 0 for t in traces)
               else ("gap",))
              for name, _, _, (f_star, _, traces), _ in sections]
    fig, axes = plt.subplots(1, sum(len(q) for *_, q in panels),
                             figsize=(6 * sum(len(q) for *_, q in panels), 4.8),
                             squeeze=False, layout="constrained")
    axes = iter(axes[0])
    for name, f_star, traces, quantities in panels:
        best = _best_per_method(traces)
        own = [next(axes) for _ in quantities]
        compare_plot([t.res for t in best], [t.label for t in best], reference=f_star,
                     quantities=quantities, target=TARGET, axes=own,
                     styles=[dict(color="k", lw=2.5) if t.label == "fedproxal"
                             else dict(lw=0.8, alpha=0.8) for t in best])
        for ax in own:
            ax.set_title(name)
    fig.savefig(path, dpi=120)
    return f"![convergence]({path.name})"


def _best_per_method(traces):
    """fedproxal and, per baseline method, its best run over the penalty weights."""
    best = {}
    for t in traces:
        key = t.label.split(" ")[0]
        if key not in best or t.score() < best[key].score():
            best[key] = t
    return list(best.values())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short budgets (smoke run)")
    C.add_output_args(parser, "baselines.md")
    args = parser.parse_args(argv)
    np_rounds, lasso_rounds = (300, 100) if args.quick else (5000, 500)
    args.tune_rounds = 50 if args.quick else 300
    start = time.perf_counter()
    sections = []
    for build, rounds, penalties in ((np_problem, np_rounds, PENALTIES),
                                     (lasso_problem, lasso_rounds, (None,))):
        problem, name, title = build()
        print(title, flush=True)
        results = compare(problem, penalties, rounds, args.tune_rounds,
                          lambda s: print(s, flush=True))
        sections.append((name, title, problem, results, rounds))
    path = C.output_path(args)
    path.parent.mkdir(parents=True, exist_ok=True)
    note = plot(sections, path.with_suffix(".png"))
    text = markdown(sections, args, time.perf_counter() - start, note)
    print(text)
    C.write(path, text)


if __name__ == "__main__":
    main()
