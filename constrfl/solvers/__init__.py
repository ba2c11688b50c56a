"""Solvers: the proximal AL outer loop (Algorithms 1 and 3), the inexact ADMM
(Algorithm 2) and the local subproblem solvers."""
