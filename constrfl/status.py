"""Solve statuses: the constants and their groups (each solve's ``message`` says which
residual or party it concerns).

A status is a claim about the returned point (cvxpy's groups, OSQP's enum of exits).
What each claims, when it is given and what the result holds: the one table, README.md
"Statuses" (tests/test_docs.py checks that it lists :data:`STATUSES` in order and marks
exactly :data:`RESUMABLE` resumable).
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
