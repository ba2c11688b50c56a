"""The in-process federation's speed against an older checkout of constrfl (issue 8:
"within 10% of today's speed"): the same solves, each tree in its own subprocess, in
the same run (alternately, twice; the smaller of the two medians of ``--repeats`` solves),
with rounds and time per round.

    git worktree add /tmp/constrfl-ref c4dc1a0        # the tree to compare with
    python validation/inprocess_speed.py --reference /tmp/constrfl-ref [--repeats 3] \
        [--update-results]          # -> validation/results/inprocess_speed.md

Cases: NP breast-cancer-wisconsin n = 20 with the fixed-ρ ADMM (β = 500, ρ = 0.008),
the federated Newton (β = 1000) and cProx-AL; the LCQP (n = 10, d = 500) with cProx-AL
and the ADMM's defaults.  Needs ../shared/data (or $CONSTRFL_DATA).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C                                                # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: (name, problem, options); ``ADMM`` marks the options that a tree with inner="auto"
#: only accepts together with inner="admm"
CASES = [("NP n=20, ADMM fixed rho", "np", dict(beta=500.0, rho=0.008, adaptive_rho=False,
                                                s_bar=1e-3), True),
         ("NP n=20, newton", "np", dict(inner="newton", beta=1000.0), False),
         ("NP n=20, cproxal", "np", dict(method="cproxal"), False),
         ("LCQP, cproxal", "lcqp", dict(method="cproxal"), False),
         ("LCQP, ADMM defaults", "lcqp", {}, True)]

RUNNER = textwrap.dedent("""
    import json, statistics, sys, time
    sys.path.insert(0, sys.argv[1])
    import constrfl as cf
    from constrfl import api
    from constrfl.problems import lcqp, neyman_pearson
    from constrfl.problems.datasets import load_breast_cancer_wisconsin
    from constrfl.problems.partition import stratified_split
    data, repeats, cases = sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
    bcw = load_breast_cancer_wisconsin(data + "/breast-cancer-wisconsin")
    problems = {"np": neyman_pearson(bcw.X, bcw.y, stratified_split(bcw.y, 20, seed=0), 0.2),
                "lcqp": lcqp(10, 500, 5, seed=0)}
    auto = hasattr(api, "choose_inner")          # inner="auto" trees name the ADMM
    out = []
    for name, prob, opts, admm in cases:
        opts = dict(opts, **({"inner": "admm"} if admm and auto else {}))
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            res = cf.solve(problems[prob], tol=1e-6, **opts)
            times.append(time.perf_counter() - t)
        out.append([name, res.status, res.rounds, res.outer_iterations,
                    statistics.median(times)])
    print(json.dumps(out))
""")


def run(tree, data, repeats):
    out = subprocess.run([sys.executable, "-c", RUNNER, str(tree), str(data), str(repeats),
                          json.dumps(CASES)], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"the solves of {tree} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fastest(runs):
    """Per case, the run with the smallest time (the least disturbed on a shared machine)."""
    return [min(rows, key=lambda row: row[-1]) for rows in zip(*runs)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", type=Path, required=True,
                    help="a checkout of the constrfl tree to compare with")
    ap.add_argument("--data", type=Path, default=C.data_dir())
    ap.add_argument("--repeats", type=int, default=3)
    C.add_output_args(ap, "inprocess_speed.md")
    args = ap.parse_args(argv)
    if not (args.data / "breast-cancer-wisconsin").is_dir():
        ap.error("the UCI data were not found: pass --data or set $CONSTRFL_DATA")
    t = time.perf_counter()
    ref, now = [], []
    for _ in range(2):                  # alternate the trees: both see the same load
        ref.append(run(args.reference, args.data, args.repeats))
        now.append(run(ROOT, args.data, args.repeats))
    ref, now = fastest(ref), fastest(now)
    reference = subprocess.run(["git", "-C", str(args.reference), "rev-parse", "--short",
                                "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = ["| case | reference: rounds, s, ms/round | this tree: rounds, s, ms/round "
             "| time ratio |", "|---|---|---|---|"]
    for (name, _, r0, _, t0), (_, status, r1, _, t1) in zip(ref, now):
        per = lambda t, r: f"{1e3 * t / r:.2f}" if r else "-"       # noqa: E731
        lines.append(f"| {name} | {r0}, {t0:.3f}, {per(t0, r0)} | {r1}, {t1:.3f}, "
                     f"{per(t1, r1)} ({status}) | {t1 / t0:.2f} |")
    text = C.header("In-process speed against an older tree", time.perf_counter() - t,
                    [f"reference tree: {args.reference} (commit {reference or '?'}); "
                     f"each tree run twice, alternately, each time {args.repeats} solves a case; "
                     "the smaller of the two medians; tol = 1e-6, wall times"])
    C.write(C.output_path(args), text + "\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
