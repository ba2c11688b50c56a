"""What secure aggregation costs in one process (issue "Secure aggregation on Flower":
``secure=True`` at 20 sites): the same solves with and without masks, alternately, in
the same run; rounds, seconds (the least of ``--repeats``: the run least disturbed by
other processes on a shared machine), their ratio, and whether
the answers are equal bit for bit.

    python validation/secure_cost.py [--repeats 3] [--parts] [--update-results]
        # -> validation/results/secure_cost.md

Cases: NP (30) on breast-cancer-wisconsin at 20 sites (d = 10) with the federated Newton
and the ADMM (the in-process speed cases); NP on adult at 20 sites (d = 100) with the
federated Newton (its Hessian triangle: 5,050 entries an upload) and Newton-CG.  Needs
../shared/data (or $CONSTRFL_DATA).  ``secure=True``: each site masks with 4 neighbours
(``--neighbours`` to change).  In one process the n sites' masks are computed one after
the other: k AES-CTR streams a site and message, O(n·k·E) a round for uploads of E
entries, where a deployment's sites compute theirs at once.

``--parts``: where the first case's extra time goes, the same solve with parts of the
masking left out, all four alternately: plain; secure with each client's
``Masks.mask_into`` returning its sums as they are (the key round, the key pairs and the
transport fields, no pair keys, no masks); with the pair keys derived but the AES
streams and their ring sums replaced by zeros; whole.  (The parts are left out by
replacing those two methods in this process only: a measurement, not a mode.)
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C                                                # noqa: E402

import constrfl as cf                                             # noqa: E402
from constrfl.problems import neyman_pearson                      # noqa: E402
from constrfl.problems.datasets import load_adult, load_breast_cancer_wisconsin  # noqa: E402
from constrfl.problems.partition import stratified_split          # noqa: E402
from constrfl.exactsum import LIMBS                                # noqa: E402
from constrfl.federation.secure import Masks                       # noqa: E402

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


def alternate(problem, options, repeats, variants):
    """``{label: (result, [seconds])}``: each of ``variants`` ((label, secure, {Masks
    method: replacement})) solved in turn, ``repeats`` times timed after one untimed
    round of them (compilation); the result is the last solve's."""
    out = {label: [None, []] for label, _, _ in variants}
    for i in range(repeats + 1):
        for label, secure, methods in variants:
            with replaced(methods):
                t = time.perf_counter()
                out[label][0] = cf.solve(problem, secure=secure, **options)
                if i:
                    out[label][1].append(time.perf_counter() - t)
    return out


def _no_masks(self, seq, sums, cohort=None):
    return sums


def _no_streams(self, seq, count, entries, cohort, into=None, start=0):
    self.pairs(cohort)                      # the pair keys, as the real streams derive them
    out = np.zeros((count * entries, LIMBS), dtype=np.uint64) if into is None else into
    return out.reshape(count, entries, LIMBS)


#: the variants of ``--parts``: (label, masked, {Masks method: replacement})
PARTS = [("plain", False, {}),
         ("secure, no pair keys and no masks", True, {"mask_into": _no_masks}),
         ("secure, pair keys, masks of zeros", True, {"streams": _no_streams}),
         ("secure, whole", True, {})]


@contextlib.contextmanager
def replaced(methods):
    """``Masks``' methods replaced by ``methods`` for the block's duration."""
    saved = {name: getattr(Masks, name) for name in methods}
    try:
        for name, f in methods.items():
            setattr(Masks, name, f)
        yield
    finally:
        for name, f in saved.items():
            setattr(Masks, name, f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--data", default=None)
    ap.add_argument("--neighbours", type=int, default=None,
                    help="secure=k (default: secure=True, 4 neighbours)")
    ap.add_argument("--parts", action="store_true",
                    help="also the first case with parts of the masking left out")
    ap.add_argument("--note", action="append", default=[])
    C.add_output_args(ap, "secure_cost.md")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    probs = problems(C.data_dir(a.data))
    rows, secure = [], a.neighbours or True
    for label, name, options in CASES:
        found = alternate(probs[name], options, a.repeats,
                          [("plain", False, {}), ("secure", secure, {})])
        (plain, times_plain), (masked, times_masked) = found["plain"], found["secure"]
        tp, tm = min(times_plain), min(times_masked)
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
    if a.parts:
        label, name, options = CASES[0]
        found = alternate(probs[name], options, a.repeats,
                          [(part, masked and secure, methods)
                           for part, masked, methods in PARTS])
        ms = {part: (1e3 * min(t), 1e3 * float(np.median(t))) for part, (_, t) in found.items()}
        base_least, base_median = ms[PARTS[0][0]]
        table = [[part, f"{least:.1f}", f"{least - base_least:+.1f}",
                  f"{median:.1f}", f"{median - base_median:+.1f}"]
                 for part, (least, median) in ms.items()]
        for row in table:
            print(" | ".join(row), flush=True)
        text += (f"\n## {label}: parts of the masking left out\n\n"
                 + C.md_table(["solve", "ms (least)", "more than plain", "ms (median)",
                               "more than plain"], table)
                 + f"\nThe {a.repeats} solves of each, alternately, after one of each "
                 "(`--parts`; the module docstring says what each leaves out).\n")
    C.write(C.output_path(a), text)


if __name__ == "__main__":
    main()
