"""The names of the methods (a leaf: the settings and the save format both read it)."""

__all__ = ["METHODS", "BASELINES"]

#: the proximal AL methods: Algorithm 1 (federated) and Algorithm 3 (centralized)
METHODS = ("fedproxal", "cproxal")
#: the federated baselines of the other seeds (docs/algorithms.md §7)
BASELINES = ("fedavg", "fedavgm", "fedadagrad", "fedyogi", "fedadam", "fedcada", "fedmid",
             "feddualavg", "fedmid-osp", "feddualavg-osp")
