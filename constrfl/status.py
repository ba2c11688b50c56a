"""Solve statuses: the constants and their groups (each solve's ``message`` says which
residual or party it concerns).

A status is a claim about the returned point (cvxpy's groups, OSQP's enum of exits):

| status | when | the result holds |
|---|---|---|
| ``optimal`` | KKT residuals recomputed at ``w`` meet ``tol`` (with ``eps_rel``: relative to their scales) | the point, multipliers |
| ``optimal_inaccurate`` | an outer iteration changed nothing, residuals within ``INACCURATE_FACTOR`` × ``tol`` | the point, multipliers |
| ``max_iterations`` | ``max_outer`` (or a baseline's ``rounds``) reached | last iterate; resumable |
| ``time_limit`` | ``max_time`` seconds passed (checked every round) | last iterate; resumable |
| ``interrupted`` | Ctrl-C (KeyboardInterrupt) | last iterate; resumable |
| ``stopped`` | the callback returned True, raised StopIteration, or raised (kept as ``error``) before the residuals met ``tol`` | last iterate; resumable |
| ``client_error`` | a party's function raised, or returned a wrong shape | last good iterate; ``error``; resumable |
| ``client_failure`` | a client did not answer within ``client_timeout`` | last good iterate; resumable |
| ``numerical_error`` | a non-finite value (a party's function or an iterate); a baseline's model beyond max(1, ‖w⁰‖∞)/ε (diverged); or an outer iteration that changed nothing, residuals beyond ``INACCURATE_FACTOR`` × ``tol`` | last finite iterate (a baseline: the last within range) |
| ``infeasible`` | a lower bound on the least violation, proven from convexity, is positive | the iterate where it was found |
| ``unbounded`` | the iterates run off while the residuals stall | last iterate |
"""
from __future__ import annotations

OPTIMAL = "optimal"
OPTIMAL_INACCURATE = "optimal_inaccurate"
MAX_ITERATIONS = "max_iterations"
TIME_LIMIT = "time_limit"
INTERRUPTED = "interrupted"
STOPPED = "stopped"
CLIENT_ERROR = "client_error"
CLIENT_FAILURE = "client_failure"
NUMERICAL_ERROR = "numerical_error"
INFEASIBLE = "infeasible"
UNBOUNDED = "unbounded"

STATUSES = (OPTIMAL, OPTIMAL_INACCURATE, MAX_ITERATIONS, TIME_LIMIT, INTERRUPTED, STOPPED,
            CLIENT_ERROR, CLIENT_FAILURE, NUMERICAL_ERROR, INFEASIBLE, UNBOUNDED)

#: ``optimal_inaccurate`` claims residuals within this multiple of ``tol`` (cvxpy's name
#: for a solution to reduced accuracy)
INACCURATE_FACTOR = 1e3

#: statuses after which ``cf.solve(problem, resume=res)`` continues the same solve
RESUMABLE = (MAX_ITERATIONS, TIME_LIMIT, INTERRUPTED, STOPPED, CLIENT_ERROR, CLIENT_FAILURE)
#: statuses that say something went wrong (not a property of the problem)
FAILED = (CLIENT_ERROR, CLIENT_FAILURE, NUMERICAL_ERROR)
