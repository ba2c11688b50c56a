"""Scikit-learn-style estimators for the classification templates (see ``_base``)."""
from ._base import (HAVE_SKLEARN, ConvergenceError, ConvergenceWarning, FairClassifier,
                    NeymanPearsonClassifier, NotFittedError, _CoefPenalty)

__all__ = ["NeymanPearsonClassifier", "FairClassifier", "ConvergenceError",
           "ConvergenceWarning", "NotFittedError", "HAVE_SKLEARN"]
