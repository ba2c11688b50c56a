"""What secure aggregation costs in one process (issue "Secure aggregation on Flower":
``secure=True`` at 20 sites): the same solves with and without masks, alternately, in
the same run; rounds, seconds (the least of ``--repeats``: the run least disturbed by
other processes on a shared machine), their ratio, and whether
the answers are equal bit for bit.

    python validation/secure_cost.py [--repeats 3] [--update-results]
        # -> validation/results/secure_cost.md

Cases: NP (30) on breast-cancer-wisconsin at 20 sites (d = 10) with the federated Newton
and the ADMM (the in-process speed cases); NP on adult at 20 sites (d = 100) with the
federated Newton (its Hessian triangle: 5,050 entries an upload) and Newton-CG.  Needs
../shared/data (or $CONSTRFL_DATA).  ``secure=True``: each site masks with 4 neighbours
(``--neighbours`` to change).  In one process the n sites' masks are computed one after
the other: k AES-CTR streams a site and message, O(n·k·E) a round for uploads of E
entries, where a deployment's sites compute theirs at once.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C                                                # noqa: E402

import constrfl as cf                                             # noqa: E402
from constrfl.problems import neyman_pearson                      # noqa: E402
from constrfl.problems.datasets import load_adult, load_breast_cancer_wisconsin  # noqa: E402
from constrfl.problems.partition import stratified_split          # noqa: E402

SITES = 20


def problems(data):
    bcw = load_breast_cancer_wisconsin(Path(data) / "breast-cancer-wisconsin")
    adult = load_adult(Path(data) / "adult")
    return {"bcw": neyman_pearson(bcw.X, bcw.y, stratified_split(bcw.y, SITES, seed=0), 0.2),
            "adult": neyman_pearson(adult.X, adult.y, stratified_split(adult.y, SITES, seed=0),
                                    0.5, regularizer=cf.prox.SquaredL2(1e-3))}


CASES = [("NP breast-cancer, 20 sites, d=10, newton", "bcw", dict(inner="newton")),
         ("NP breast-cancer, 20 sites, d=10, admm", "bcw", dict(inner="admm")),
         ("NP adult, 20 sites, newton", "adult", dict(inner="newton")),
         ("NP adult, 20 sites, newton-cg", "adult", dict(inner="newton-cg"))]


def measure(problem, options, repeats, secure):
    """``(plain, masked, plain seconds, masked seconds)``: the least of ``repeats``
    alternating solves, after one of each (compilation)."""
    times = {False: [], True: []}
    out = {}
    for i in range(repeats + 1):
        for masked in (False, True):
            t = time.perf_counter()
            out[masked] = cf.solve(problem, secure=masked and secure, **options)
            if i:
                times[masked].append(time.perf_counter() - t)
    return out[False], out[True], min(times[False]), min(times[True])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--data", default=None)
    ap.add_argument("--neighbours", type=int, default=None,
                    help="secure=k (default: secure=True, 4 neighbours)")
    ap.add_argument("--note", action="append", default=[])
    C.add_output_args(ap, "secure_cost.md")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    probs = problems(C.data_dir(a.data))
    rows = []
    for label, name, options in CASES:
        plain, masked, tp, tm = measure(probs[name], options, a.repeats,
                                        a.neighbours or True)
        same = masked.w.tobytes() == plain.w.tobytes()
        rows.append([label, f"d={probs[name].dim}", plain.status, plain.rounds, masked.rounds,
                     f"{tp:.3g}", f"{tm:.3g}", f"{tm / tp:.2f}",
                     f"{1e3 * (tm - tp) / masked.rounds:.2g}",
                     "yes" if same else "NO"])
        print(" | ".join(map(str, rows[-1])), flush=True)
    text = C.header("Secure aggregation's cost in one process", time.perf_counter() - t0,
                    a.note)
    text += ("\n" + C.md_table(["case", "dim", "status", "rounds plain", "rounds secure",
                                "s plain", "s secure", "ratio", "ms more a round",
                                "same w bit for bit"], rows))
    text += (f"\nSeconds: the least of {a.repeats} solves each (the least disturbed by other "
             "processes), alternating plain and "
             "secure, after one of each.  Secure: "
             + (f"`secure={a.neighbours}`" if a.neighbours else "`secure=True` (4 neighbours)")
             + ".  The secure solve has one round more (the key agreement); in one process "
             "the sites' masks are computed one after the other.\n")
    C.write(C.output_path(a), text)


if __name__ == "__main__":
    main()
