"""Scikit-learn-style estimators for the classification templates.

:class:`NeymanPearsonClassifier` (template (30)) and :class:`FairClassifier` (template (32))
wrap ``problems.neyman_pearson`` / ``problems.fairness`` and :func:`constrfl.solve` behind
``fit`` / ``predict`` / ``predict_proba`` / ``decision_function`` / ``score`` /
``get_params`` / ``set_params``::

    from constrfl.estimators import NeymanPearsonClassifier
    clf = NeymanPearsonClassifier(max_class1_loss=0.2).fit(X, y, client_ids=site)
    clf.predict(X_new); clf.coef_, clf.intercept_, clf.result_.kkt

**scikit-learn is optional.**  When it is installed the estimators derive from its
``ClassifierMixin`` and ``BaseEstimator`` and validate their input with its
``validate_data``, so ``clone``, ``Pipeline``, ``GridSearchCV`` and ``check_estimator``
work: ``check_estimator(NeymanPearsonClassifier())`` and
``check_estimator(FairClassifier())`` pass, unmodified (FairClassifier fits without a
disparity constraint, and warns, when no ``sensitive_features`` are given, as in those
checks; see its docstring).  Without it, a small stand-in base class gives the same
``get_params`` / ``set_params`` (read off the ``__init__`` signature), ``score``
(accuracy) and input checks on NumPy arrays.

The model
---------
A linear classifier: ``decision_function(X) = X @ coef_[0] + intercept_[0]``;
``predict`` returns ``classes_[1]`` where it is > 0, else ``classes_[0]``;
``predict_proba`` is the logistic sigmoid of it (columns in ``classes_`` order).  The
weights solve a constrained *training* problem, so these are scores, not calibrated
probabilities.  The objective is the template's, plus the penalty
``(alpha/2)‖coef‖² + regularizer(coef)``:

* ``fit_intercept=True`` appends a column of ones to X internally; its weight is
  ``intercept_``.  **If X already ends with a column of ones** (the loaders of
  :mod:`constrfl.problems.datasets` append one), that column is taken as the intercept
  instead of adding a second one: its ``coef_`` entry is 0, ``regularizer`` acts on the
  other ``n_features − 1`` columns, and the model is exactly that fitted on X without
  the column.  (With ``fit_intercept=False`` a ones column is an ordinary feature.)
  **The penalty and the regularizer act on coef only**; the intercept is
  free (as in scikit-learn's LogisticRegression).  Because it is free, the solver works
  with the features centred by their pooled column means ``m`` (score
  ``coef·(x − m) + b′``, and ``intercept_ = b′ − coef·m``): an exact reparametrization
  (same losses, constraints and solution) that keeps the solve well conditioned when the
  features are far from 0; with features of mean 100 it is the difference between 8
  outer iterations and 200 without convergence.  A ``scipy.sparse`` X is not centred
  (that would densify it) and stays sparse.
* **Column scales.**  The solver's columns are also divided by scales σⱼ (sparse ones
  too): the column's standard deviation, capped at ``√(aⱼ·beta)``, where aⱼ is coef_j's
  ridge weight (``alpha`` plus the quadratic weight q of the ``regularizer``'s pieces:
  the lam of a SquaredL2, the l2 of an ElasticNet).
  This too is exact: the solver's point is ``c̃ = σ·coef``, and the penalty keeps its
  meaning on the *original* coef as the weighted penalty ``(α/2)‖c̃/σ‖² + R(c̃/σ)``,
  in the package's regularizers ``prox.Leading(prox.Ridged(R, alpha), k, σ)`` (nothing
  on the intercept), whose prox is exact coordinate by coordinate for a separable
  regularizer (with a non-separable one, L1Ball, L2Ball or Nuclear, the columns are not
  scaled).  The cap:
  in the solver's coordinates the ridge's curvature is aⱼ/σⱼ², and the outer proximal
  loop contracts by 1/(1 + beta·curvature) where the data are flat; the cap keeps that
  curvature ≥ 1/beta.  The rule is
  unit-free: raw features cost the rounds of standardized features fitted with the
  equivalent weighted ridge (``prox.SquaredL2(alpha / s**2)``).  Measured on
  scikit-learn's raw breast-cancer data, 5 clients, fedproxal (NP, r = 0.3): alpha = 10,
  33 rounds with the cap against 145 uncapped (standardized data: 20); alpha = 1e-2, 55
  against 143 (standardized: 36).  The price: a feature × 1e6 keeps most of its scale
  (NP, 600 Gaussian rows, 6 features, 3 clients: 41 rounds against 27 on the clean data;
  a sparse X with a constant column not last, 29; tests/test_estimators.py).  These
  coordinates take the place of ``cf.solve``'s own scaling: the estimators solve with
  ``scaling=False`` (the row scaling on top of them took 163 rounds on that feature ×
  1e6); ``solver_options={"scaling": ...}`` sets it.
* ``result_`` (``w``, ``kkt``) is in the solver's coordinates,
  ``result_.w = [σ·coef, b′]``.  In a real deployment the means and scales cost every
  client one message (its column sums, sums of squares and row count) that
  ``result_.rounds`` and ``bytes_up`` do not count.  ``tol`` is absolute in these
  coordinates.
* ``alpha > 0`` (default 1e-2) makes the objective strongly convex.  It matters: on
  linearly separable data (the standardized breast-cancer data are separable, as are
  most small or high-dimensional data sets) the losses can be driven to 0 by scaling w, the unpenalized
  problem has no minimizer, and the solver cannot reach ``status == "optimal"``.

Labels
------
``y`` may hold any two labels; ``classes_ = np.unique(y)`` (sorted) and **``classes_[1]``
plays the role of class 1** of the templates: for the Neyman-Pearson classifier it is the
*protected* class whose mean logistic loss is bounded by ``max_class1_loss`` on every
client (relabel, e.g. ``y == "malignant"``, to choose which class is protected).

Failure is loud
---------------
``fit`` checks ``result_.status``.  Unless it is ``"optimal"`` (KKT residuals, recomputed
at the returned point, within ``tol``; in particular no constraint is violated by more
than ε₂, the second entry of ``tol``), ``on_failure="raise"`` (the default) raises :class:`ConvergenceError`, which
carries the :class:`~constrfl.result.SolveResult` as ``err.result``, and leaves the
estimator unfitted.  ``on_failure="warn"`` keeps the model, sets the fitted attributes
and emits a :class:`ConvergenceWarning` instead; then ``result_.status`` and
``result_.kkt`` say how far from optimal and feasible it is.  An unattainable bound ends
in status ``"infeasible"``, hence in the same error.

``score`` is the accuracy (scikit-learn's convention); what the constraint controls is a
loss, so judge a Neyman-Pearson model by its class-1 loss or recall as well.

Cross-validation
----------------
Per-row arguments of ``fit`` (``client_ids``, ``sensitive_features``) are split with
the rows by ``GridSearchCV`` and ``cross_val_score``.  The default folds (stratified
by class) test new rows of the same clients; a training fold may leave a small client
without one class, which is fitted as it is (see each ``fit``).  To test on clients
left out of training, group the folds by client::

    GridSearchCV(NeymanPearsonClassifier(), grid, cv=GroupKFold(5)).fit(
        X, y, groups=client_ids, client_ids=client_ids)

Scoring: accuracy (scikit-learn's default) rewards a loose class-1 bound.  To choose
a model under the Neyman-Pearson paradigm, score on held-out rows by the class-0 error
subject to the bound the application needs (:func:`neyman_pearson_scorer`)::

    GridSearchCV(NeymanPearsonClassifier(), {"max_class1_loss": [0.2, 0.3, 0.45]},
                 scoring=neyman_pearson_scorer(0.3)).fit(X, y, client_ids=client_ids)
"""
from ._base import ConvergenceError
from ._sklearn import HAVE_SKLEARN, ConvergenceWarning, NotFittedError
from .fairness import FairClassifier
from .neyman_pearson import NeymanPearsonClassifier, neyman_pearson_scorer

__all__ = ["NeymanPearsonClassifier", "FairClassifier", "neyman_pearson_scorer",
           "ConvergenceError",
           "ConvergenceWarning", "NotFittedError", "HAVE_SKLEARN"]
