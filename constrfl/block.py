"""The ADMM block step, specified once: a block's side of Algorithm 2 (the ``admm.step``
handler of :mod:`constrfl.parties.admm`) runs on one of two implementations,

* the generic one, function by function (``parties.admm._block_step``), for every party;
* the compiled one, the whole step in one call
  (:func:`~constrfl.kernels.stacked_admm_step`), for the parties :func:`compiled_block`
  accepts, falling back on the generic one where it hands back (a value that is not
  finite, a Hessian that is not positive definite).

Both take from here their tuning constants, the acceptance test of the local Newton
method that solves (19), and which of them runs (docs/algorithms.md §4, §8;
``tests/test_admm_block.py`` checks that they agree on every branch).

The acceptance test and its constant are *defined* in :mod:`constrfl.kernels`, which this
module imports them from: numba's on-disk cache of a compiled function is invalidated
only by changes to the file that defines it, not to the files of the compiled functions
or constants it uses, so a test defined here would leave a stale copy in the cached
kernels after an edit.  Everything else here is Python only (the kernels get
:data:`RELAXATION` as an argument).
"""
from __future__ import annotations

from .kernels import ARMIJO, step_accepted

__all__ = ["SPECTRAL_EVERY", "SPECTRAL_WEIGHT", "SPECTRAL_HORIZON", "LOCAL_FRACTION",
           "RELAXATION", "ARMIJO", "step_accepted", "exact_block", "compiled_block"]

#: the block's penalty rule: every ``SPECTRAL_EVERY`` rounds the spectral estimate
#: rᵢ = ‖Δλᵢ‖/‖Δw‖ and ρᵢ ← ρᵢ^(1−a)·rᵢ^a,
#: a = ``SPECTRAL_WEIGHT``/(1 + (j/``SPECTRAL_HORIZON``)²) at the block's j-th change
#: (summable weights: ρᵢ settles)
SPECTRAL_EVERY, SPECTRAL_WEIGHT, SPECTRAL_HORIZON = 5, 0.3, 20

#: (19) is solved to ``LOCAL_FRACTION``·ρᵢ‖wᵗ⁺¹ − wᵗ‖∞ (at most τ, at least τ/1000): an
#: error that follows the ADMM's own progress
LOCAL_FRACTION = 0.1

#: (19) and (20) at the over-relaxed ŵ = α·wᵗ⁺¹ + (1 − α)·uᵢ, α = ``RELAXATION`` (Boyd et
#: al. 2011, §3.4.3)
RELAXATION = 1.5


def exact_block(party, local_hessian):
    """Whether (19) is one linear solve: φᵢ a convex quadratic (a quadratic or no
    objective, affine equalities, no inequalities) and the local solver Newton; the
    block then solves it with the eigendecomposition of ∇²φᵢ, for any ρᵢ."""
    return bool(local_hessian and party.constant_hessian and party.is_convex)


def compiled_block(party, local_hessian):
    """Whether the fused kernel (:func:`~constrfl.kernels.stacked_admm_step`) runs the
    block step, because it covers exactly these blocks and pays on them:

    * the local solver is Newton (the kernel's (19) is the compiled Newton method);
    * the objective and inequalities are stacked row losses (``party.stacked``: the
      kernel evaluates them in one pass) and there are no equalities (it has none);
    * the dimension is at most :data:`~constrfl.stacked.COMPILED_NEWTON_MAX_DIM` (its
      own Cholesky loses to LAPACK's above);
    * (19) is not one linear solve (:func:`exact_block`), which beats Newton iterations.
    """
    return bool(local_hessian and party.stacked is not None
                and party.stacked.compiled_newton and not party.n_eq
                and not exact_block(party, local_hessian))
