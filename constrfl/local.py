"""Local solvers and the pieces of (proximal) Newton steps.

* :func:`minimize_smooth`: (semismooth) Newton with an Armijo line search for a smooth,
  strongly convex function, its directions from the Hessian or, with Hessian products
  only, by conjugate gradients (truncated Newton, :func:`cg_direction`); L-BFGS
  (scipy's, with one BLAS thread at large d) when neither is available.  Stops when
  ``‖∇f(x)‖∞ ≤ tol``.  A party runs it on (19) inside its ADMM handler (compiled for
  a party of stacked row losses: :func:`~constrfl.kernels.stacked_minimize`).
* :func:`newton_direction`, :func:`accept_step`: the steps of the server's Newton method
  (:mod:`.newton`; its proximal step: :mod:`.proxstep`); the acceptance test is the
  compiled local Newton's too (:mod:`.block`).

Smooth functions follow the protocol of :mod:`.augmented`: ``fun(x, order)``.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
import scipy.optimize
from scipy.linalg import lapack
from threadpoolctl import ThreadpoolController

from . import kernels
from .block import step_accepted


@dataclass
class LocalResult:
    x: np.ndarray
    iterations: int
    residual: float
    converged: bool


def positive_model(H, floor):
    """``(λ, V)`` with ``V diag(λ) Vᵀ`` the model Hessian of a Newton step: H's own
    eigenpairs when H ≻ 0, else its eigenvalues replaced by ``max(|λ|, floor·max|λ|)``
    (modified Newton, Nocedal & Wright §3.4): a nonconvex problem's indefinite H gives a
    descent step, at the scale of H, instead of an ascent or a huge one."""
    lam, V = np.linalg.eigh(H)
    return np.maximum(np.abs(lam), floor * max(1.0, float(np.abs(lam).max()))), V


#: up to this dimension a Newton system is solved by LAPACK's potrf/potrs called directly
#: (4× faster than NumPy's Cholesky and LU solve at d = 20; serial at these sizes); above
#: it by NumPy's Cholesky and compiled triangular solves (SciPy's multithreaded LAPACK
#: competes with NumPy's BLAS threads: measured 3× slower cProx-AL on the LCQP, d = 500)
DIRECT_LAPACK_MAX_DIM = 64
#: above this dimension L-BFGS runs with one BLAS thread (:func:`_lbfgs`): OpenBLAS
#: threads a vector operation above 10,000 entries (measured: a NumPy dot and a SciPy
#: ddot in turn, 9 µs the pair at 10,000 entries, 9.7 ms at 10,001); below there are no
#: threads to wait for
LBFGS_ONE_THREAD_ABOVE = 10_000
#: conjugate gradient iterations (Hessian products) at most for a truncated Newton step
#: (:func:`cg_direction`)
CG_MAX_ITER = 200
#: the process's BLAS libraries (NumPy's and SciPy's, loaded by the imports above), found
#: once: ``threadpool_limits`` scans the process's libraries at every call (1.7 ms, in a
#: local solve of every client in every round), a limit on the found ones takes 0.02 ms
_BLAS_POOLS = ThreadpoolController()


def newton_direction(H, g):
    """``d = −H⁻¹g`` by a Cholesky factorization when H ≻ 0, else with the model of
    :func:`positive_model`."""
    if not (math.isfinite(H.sum()) or np.isfinite(H).all()):
        return np.full_like(g, np.nan)       # the caller reports the non-finite step
    if g.size <= DIRECT_LAPACK_MAX_DIM:
        factor, info = lapack.dpotrf(H, lower=False, clean=False)
        if info == 0:
            return -lapack.dpotrs(factor, g, lower=False)[0]
    else:
        try:
            return -kernels.cholesky_solve(np.linalg.cholesky(H), g)
        except np.linalg.LinAlgError:
            pass
    lam, V = positive_model(H, 1e-12)
    return -V @ ((V.T @ g) / lam)


def accept_step(f_new, f, slope, t, r_new, r):
    """Armijo decrease, or (near the solution, where f stalls at rounding level) a
    halving of the stationarity residual (``r_new``, None when not known) without an
    increase of f: :func:`~constrfl.kernels.step_accepted`, the compiled local Newton's
    test, run as Python."""
    return step_accepted.py_func(f_new, f, slope, t,
                                 math.nan if r_new is None else r_new, r)


def minimize_smooth(fun, x0, tol, max_iter=100, use_hessian=True, operator=None):
    """Minimize a smooth strongly convex ``fun`` from ``x0`` until ``‖∇f‖∞ ≤ tol`` by
    Newton steps with an Armijo line search: directions from the Hessian, or without
    one (``use_hessian=False``) from the products of ``operator(x)``, a function
    v ↦ ∇²f(x)v, by conjugate gradients (:func:`cg_direction`: truncated Newton); L-BFGS
    where neither is available (no Hessian, or a product that is None)."""
    x = np.array(x0, dtype=np.float64)
    products = operator is not None and not use_hessian
    f, g, H = fun(x, 2 if use_hessian else 1)
    if H is None and not products:
        return _lbfgs(fun, x, tol, max_iter)
    r = float(abs(g).max())
    for it in range(max_iter):
        if r <= tol:
            return LocalResult(x, it, r, True)
        d = cg_direction(operator(x), g) if products else newton_direction(H, g)
        if d is None:                        # a function without Hessian products
            return _lbfgs(fun, x, tol, max_iter)
        slope = float(g @ d)
        if not slope < 0:
            d, slope = -g, -float(g @ g)
        t = 1.0
        while True:
            x_new = x + t * d
            f_new, g_new, _ = fun(x_new, 1)
            r_new = float(abs(g_new).max()) if np.isfinite(g_new).all() else None
            if accept_step(f_new, f, slope, t, r_new, r):
                break
            t *= 0.5
            if t < 1e-12:
                return LocalResult(x, it, r, False)
        x, f, g = x_new, f_new, g_new
        r = float(abs(g).max())
        if r <= tol:                         # no Hessian needed at the last point
            return LocalResult(x, it + 1, r, True)
        if not products:
            H = fun(x, 2)[2]
    return LocalResult(x, max_iter, r, r <= tol)


def cg_direction(product, g, max_iter=CG_MAX_ITER):
    """The truncated Newton direction (Nocedal & Wright §7.1): conjugate gradients on
    Hd = −g with ``product(v)`` = Hv, from d = 0, until ‖Hd + g‖₂ ≤ min(½, √‖g‖₂)·‖g‖₂
    (the forcing term of the server's Newton-CG: superlinear) or ``max_iter`` products,
    or at a direction of no curvature (with the d so far; −g if that is the first).
    None where a product is None."""
    d, r = np.zeros_like(g), -g                # (d, r and p are this loop's own arrays)
    p, rr = r.copy(), float(g @ g)
    tol = min(0.5, math.sqrt(math.sqrt(rr))) * math.sqrt(rr)
    for _ in range(max_iter):
        Hp = product(p)
        if Hp is None:
            return None
        pHp = float(p @ Hp)
        if not pHp > 0:
            break
        alpha = rr / pHp
        kernels.cg_step(d, r, p, Hp, alpha)
        rr, rr_old = float(r @ r), rr
        if math.sqrt(rr) <= tol:
            break
        kernels.cg_direction_update(p, r, rr / rr_old)
    return d if d.any() else -g


def _lbfgs(fun, x0, tol, max_iter):
    """scipy's L-BFGS-B, with one BLAS thread above ``LBFGS_ONE_THREAD_ABOVE`` entries.
    NumPy and SciPy each bring their own OpenBLAS and thread pool; L-BFGS-B's vector
    operations (SciPy's) alternating with those of ``fun`` (NumPy's) made each pool wait
    for the other's spinning threads: ~8 ms a switch on two cores once a vector passes
    10,000 entries (measured: NP sparse d = 20,000 with ℓ1, the ADMM's clients: 22
    rounds in 30 s, 112 with the limit).  One thread is also what the benchmarks run."""
    limit = (_BLAS_POOLS.limit(limits=1, user_api="blas")
             if x0.size > LBFGS_ONE_THREAD_ABOVE else contextlib.nullcontext())
    with limit:
        res = scipy.optimize.minimize(lambda x: fun(x, 1)[:2], x0, jac=True,
                                      method="L-BFGS-B",
                                      options={"gtol": tol, "ftol": 0.0, "maxcor": 20,
                                               "maxiter": 50 * max_iter})
        r = float(np.max(np.abs(fun(res.x, 1)[1])))
    return LocalResult(res.x, int(res.nit), r, r <= tol)


def woodbury_solve(base_solve, U, r):
    """(B + UᵀU)⁻¹ r from ``base_solve(X) = B⁻¹X`` (on a vector or the columns of a
    matrix): B⁻¹r − B⁻¹Uᵀ(I + UB⁻¹Uᵀ)⁻¹UB⁻¹r, one solve of the size of U's rows."""
    y = base_solve(r)
    if not U.shape[0]:
        return y
    BU = base_solve(U.T)
    return y - BU @ np.linalg.solve(np.eye(U.shape[0]) + U @ BU, U @ y)
