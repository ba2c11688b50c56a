"""constrfl: federated learning with general constraints.

The federated proximal augmented Lagrangian of He, Peng & Sun (TMLR 2024) with its
inexact ADMM subproblem solver, its centralized twin, KKT certificates and a cvxpy
ground-truth check.  See README.md, and docs/algorithms.md for the mathematics.
"""
from . import functions, prox
from .api import BASELINES, METHODS, solve
from .groundtruth import Certificate, certify
from .errors import PartyError
from .residuals import kkt
from .problem import Client, Problem, Server
from .result import KKT, Multipliers, SolveResult, load_result

__all__ = ["solve", "certify", "kkt", "Problem", "Client", "Server", "SolveResult", "KKT",
           "Multipliers", "Certificate", "PartyError", "load_result", "functions", "prox",
           "METHODS", "BASELINES",
           "NeymanPearsonClassifier", "FairClassifier"]
_ESTIMATORS = ("NeymanPearsonClassifier", "FairClassifier")


def __getattr__(name):
    """The estimators load on first use (they import scikit-learn when present)."""
    if name in _ESTIMATORS:
        from . import estimators
        return getattr(estimators, name)
    raise AttributeError(f"module 'constrfl' has no attribute {name!r}")
__version__ = "0.1.0"
