"""Plain records of a solve (:class:`Multipliers`, :class:`KKT`) and the registry of the
stable tags under which a saved result names each dataclass it holds.

A dataclass that a result's ``state`` may hold registers itself where it is defined with
``@saved_as("tag")``; the save format writes the tag, never the class name, so renaming or
moving a class leaves saved files valid.  This module imports nothing from the package,
so every module (:mod:`constrfl.result` and the solvers alike) may import it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Multipliers", "KKT", "saved_as", "saved_tag", "saved_class"]

_CLASSES = {}   # tag -> class
_TAGS = {}      # class -> tag


def saved_as(tag):
    """Class decorator: save the class's instances under ``tag`` (unique, and never to
    change once results carrying it exist)."""
    def register(cls):
        if _CLASSES.setdefault(tag, cls) is not cls:
            raise ValueError(f"saved tag {tag!r} is already {_CLASSES[tag].__qualname__}'s")
        _TAGS[cls] = tag
        return cls
    return register


def saved_tag(cls):
    """The tag ``cls`` is saved under."""
    if cls not in _TAGS:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} cannot be saved: it has no "
                        f"tag (register it with constrfl.records.saved_as)")
    return _TAGS[cls]


def saved_class(tag):
    """The class registered under ``tag``."""
    if tag not in _CLASSES:
        raise ValueError(f"unknown saved type tag {tag!r} (known: "
                         f"{', '.join(sorted(_CLASSES))})")
    return _CLASSES[tag]


@saved_as("multipliers")
@dataclass
class Multipliers:
    """One party's multipliers: ``ineq`` (μ ≥ 0, for c ≤ 0) and ``eq`` (ν, for h = 0),
    in the order the party's constraints were given (vector-valued ones expanded)."""

    ineq: np.ndarray
    eq: np.ndarray


@saved_as("kkt")
@dataclass
class KKT:
    """Residuals of docs/algorithms.md §2 at a point ``(w, μ, ν)``: stationarity in the
    ∞-norm, the others in the 2-norm over every constraint row of every party (what a
    sum over the parties gives; each bounds the ∞-norm of the same rows from above, so a
    residual within tol certifies the ∞-norm as well).

    * ``stationarity`` = dist∞(0, ∇f + ∇c·μ + ∇h·ν + ∂P(w)), exact unless
      ``exact_stationarity`` is False (then the regularizer's documented stand-in: the
      prox-gradient residual ‖w − prox_P(w − g)‖∞ for the nuclear norm);
    * ``feasibility`` = ‖([c(w)]₊, h(w))‖₂;
    * ``complementarity`` = ‖min(μ, −c(w))‖₂ (the natural residual);
    * ``definition1`` = ‖(dist(cⱼ(w), N_{R₊}(μⱼ))ⱼ, h(w))‖₂, the feasibility measure of
      Definition 1 (ε₂ bounds it);
    * ``stationarity_scale`` S₁ = max(‖∇f(w)‖∞, ‖∇c(w)ᵀμ + ∇h(w)ᵀν‖∞) (the terms of the
      stationarity residual, each summed over the parties) and ``feasibility_scale``
      S₂ = max(‖(∇gⱼ(w)ᵀw)ⱼ‖₂, ‖(gⱼ(w) − ∇gⱼ(w)ᵀw)ⱼ‖₂) over the constraint rows j
      (g = (c, h); for an affine row aᵀw + b: aᵀw and b), the sizes of the terms the
      residuals subtract (docs/algorithms.md §2), against which a relative tolerance
      measures them.
    """

    stationarity: float
    feasibility: float
    complementarity: float
    definition1: float
    exact_stationarity: bool = True
    stationarity_scale: float = 0.0
    feasibility_scale: float = 0.0

    RECORDED = ("stationarity", "feasibility", "complementarity", "definition1",
                "stationarity_scale", "feasibility_scale")

    @classmethod
    def of(cls, record, exact_stationarity=True):
        """The KKT of a history record (a dict with the :attr:`RECORDED` keys; the scales
        may be missing, as in results saved before they were recorded)."""
        return cls(record["stationarity"], record["feasibility"],
                   record["complementarity"], record["definition1"], exact_stationarity,
                   record.get("stationarity_scale", 0.0),
                   record.get("feasibility_scale", 0.0))

    def tolerances(self, eps1, eps2, eps_rel=0.0):
        """The bounds (ε₁ + ε_rel·S₁, ε₂ + ε_rel·S₂) of :meth:`meets`."""
        return (eps1 + eps_rel * self.stationarity_scale,
                eps2 + eps_rel * self.feasibility_scale)

    def meets(self, eps1, eps2, eps_rel=0.0):
        """True when (w, μ, ν) is (ε₁, ε₂)-optimal in the sense of Definition 1, with
        ``eps_rel`` > 0 relative to the scales: stationarity ≤ ε₁ + ε_rel·S₁ and
        Definition 1 ≤ ε₂ + ε_rel·S₂ (OSQP's ε_abs + ε_rel·max‖terms‖)."""
        bound1, bound2 = self.tolerances(eps1, eps2, eps_rel)
        return self.stationarity <= bound1 and self.definition1 <= bound2

    def failures(self, eps1, eps2, eps_rel=0.0):
        """Names of the residuals above their tolerance, with their values."""
        bound1, bound2 = self.tolerances(eps1, eps2, eps_rel)
        out = []
        if not self.stationarity <= bound1:
            out.append(f"stationarity {self.stationarity:.2e} > {bound1:.1e}")
        if not self.definition1 <= bound2:
            out.append(f"feasibility/complementarity (Definition 1) "
                       f"{self.definition1:.2e} > {bound2:.1e}")
        return out
