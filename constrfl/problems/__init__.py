"""Problem templates (docs/algorithms.md §6–7), data loaders and partitioners."""
from .fairness import fairness
from .lasso import federated_lasso
from .lcqp import lcqp
from .low_rank import low_rank_matrix
from .neyman_pearson import neyman_pearson
from .norm_ball import norm_ball_logistic
from .qp import QuadraticProgram, federated_qp

__all__ = ["fairness", "federated_lasso", "federated_qp", "lcqp", "low_rank_matrix",
           "neyman_pearson", "norm_ball_logistic", "QuadraticProgram"]
