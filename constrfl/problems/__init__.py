"""Problem templates (ALGORITHMS.md §6–7), data loaders and partitioners."""
from .lcqp import lcqp
from .neyman_pearson import neyman_pearson

__all__ = ["lcqp", "neyman_pearson"]
