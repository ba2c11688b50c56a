"""Randomized sketches of a PSD matrix the server sees only as a sum: a random
orthonormal Ω (:func:`random_sketch`) the parties multiply, and the Nyström approximation
of A from Y = AΩ (:func:`nystrom`): the ADMM's penalty metric (ΣJᵢᵀJᵢ, exact: its rank
is below k; docs/algorithms.md §4)."""
from __future__ import annotations

import numpy as np

__all__ = ["random_sketch", "nystrom"]


def random_sketch(d, k, seed=0):
    """Ω: the orthonormal Q of a d×k Gaussian matrix from a generator seeded by ``seed``
    (the same Ω in every run, and at the parties and the server)."""
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((d, k)))[0]


def nystrom(Y, Omega):
    """``(U, λ)`` with A ≈ U diag(λ) Uᵀ from the sketch Y = AΩ of a PSD A (λ > 0 only,
    descending): the stabilized Nyström approximation (Tropp, Yurtsever, Udell & Cevher,
    SIAM J. Matrix Anal. Appl. 2017, Alg. 3), exact up to rounding when rank A < k or
    k = d.  Raises ``numpy.linalg.LinAlgError`` where ΩᵀY is not positive definite (A
    not PSD)."""
    nu = np.sqrt(Y.shape[0]) * np.finfo(float).eps * np.linalg.norm(Y, 2)
    Y_nu = Y + nu * Omega
    B = Omega.T @ Y_nu
    C = np.linalg.cholesky((B + B.T) / 2)
    E = np.linalg.solve(C, Y_nu.T).T                  # Y_nu C⁻ᵀ
    U, sigma, _ = np.linalg.svd(E, full_matrices=False)
    lam = sigma ** 2 - nu
    keep = lam > nu * Y.shape[1]
    return U[:, keep], lam[keep]
