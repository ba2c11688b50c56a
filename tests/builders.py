"""Small problem instances shared by the tests (synthetic, no files needed)."""
import numpy as np
import scipy.sparse as sp

from constrfl import prox
from constrfl.problems import lcqp, neyman_pearson
from constrfl.problems.datasets import make_classification
from constrfl.problems.partition import stratified_split


WIDE_DIM, WIDE_CLIENTS, WIDE_ROWS = 120, 6, 30    # fewer rows a client than d/2


def wide_np(server_rows=0, seed=0):
    """NP (30) with more features than a client has rows (``inner="newton-basis"``
    sends row bases), ridge 1e-2; returns ``((data, server_data), problem)``."""
    data = make_classification(n_samples=WIDE_CLIENTS * WIDE_ROWS, n_features=WIDE_DIM - 1,
                               seed=seed)
    server = None
    if server_rows:
        sv = make_classification(n_samples=server_rows, n_features=WIDE_DIM - 1,
                                 seed=seed + 1)
        server = (sv.X, sv.y)
    ids = stratified_split(data.y, WIDE_CLIENTS, seed=seed)
    return (data, server), neyman_pearson(data.X, data.y, ids, 0.3, server_data=server,
                                          regularizer=prox.SquaredL2(1e-2))


def sparse_np(regularizer, clients=3, rows=60, dim=400, density=0.02, server_rows=0, seed=0):
    """NP (30) on sparse rows (standard normal values at ``density``, labels from a sparse
    linear model plus noise, an intercept column; ``inner="newton-basis"`` sends the
    sparse Hessians (B4)); returns ``((X, y, ids, server), problem)``."""
    rng = np.random.default_rng(seed)

    def rows_of(n):
        X = sp.random(n, dim - 1, density=density, random_state=rng, format="csr")
        X.data = rng.standard_normal(X.nnz)
        return X
    coef = np.zeros(dim - 1)
    coef[rng.choice(dim - 1, 10, replace=False)] = 3 * rng.standard_normal(10)

    def labelled(X):
        y = (X @ coef + 0.5 * rng.standard_normal(X.shape[0]) > 0).astype(int)
        return sp.hstack([X, np.ones((X.shape[0], 1))], format="csr"), y
    X, y = labelled(rows_of(clients * rows))
    server = labelled(rows_of(server_rows)) if server_rows else None
    ids = stratified_split(y, clients, seed=seed)
    return (X, y, ids, server), neyman_pearson(X, y, ids, 0.3, server_data=server,
                                               regularizer=regularizer)


def np_problem(n_clients, r=0.4, rows=600, server_separation=None, regularizer=None, seed=0):
    """Neyman-Pearson (30) on synthetic data; ``server_separation`` adds a global
    class-1 constraint on 200 server rows (lower separation = harder to satisfy)."""
    data = make_classification(n_samples=rows, n_features=5, seed=seed)
    ids = stratified_split(data.y, n_clients, seed=seed)
    server = None
    if server_separation is not None:
        sv = make_classification(n_samples=200, n_features=5, separation=server_separation,
                                 seed=seed + 100)
        server = (sv.X, sv.y)
    return neyman_pearson(data.X, data.y, ids, r, server_data=server, regularizer=regularizer)


def lcqp_problem():
    return lcqp(n_clients=5, dim=50, rows_per_client=2, seed=0)


def count_metric_rows(monkeypatch):
    """A list that collects, as the solve runs, the number of rows of every ADMM penalty
    metric Jᵢ a block chooses (``admm.start`` warm)."""
    from constrfl.parties import admm as handlers
    rows, real = [], handlers._constraint_metric

    def spy(*args):
        J = real(*args)
        rows.append(J.shape[0])
        return J
    monkeypatch.setattr(handlers, "_constraint_metric", spy)
    return rows


def resume_after_interrupt(monkeypatch, tmp_path, problem, stop, **opts):
    """Solve ``problem`` whole, then again interrupted (a KeyboardInterrupt) before the
    first message at which ``stop(the message types so far)`` holds, saved, loaded and
    resumed; returns ``(full, resumed)``."""
    import constrfl as cf
    from constrfl.federation import base
    full = cf.solve(problem, **opts)
    original, seen = base.Federation.broadcast, []

    def interrupt(self, kind, payload, *args, **kwargs):
        seen.append(kind)
        if stop(seen):
            raise KeyboardInterrupt
        return original(self, kind, payload, *args, **kwargs)
    monkeypatch.setattr(base.Federation, "broadcast", interrupt)
    part = cf.solve(problem, **opts)
    monkeypatch.setattr(base.Federation, "broadcast", original)
    assert part.status == "interrupted"
    return full, cf.solve(problem, resume=cf.load_result(part.save(tmp_path / "part")))


def spy_uploads(monkeypatch):
    """A list that collects, round by round, ``(message type, {client: reply})`` of
    the replies as they leave the clients in-process (encoded: a sum field's entries
    as uint64 limbs, :func:`constrfl.federation.runtime.encode_reply`)."""
    from constrfl.federation import InProcessFederation
    sent, original = [], InProcessFederation._exchange

    def spy(self, seq, kind, payloads):
        replies = original(self, seq, kind, payloads)
        sent.append((kind, replies))
        return replies
    monkeypatch.setattr(InProcessFederation, "_exchange", spy)
    return sent


def entries(reply):
    """The entries of an encoded reply: 4 limbs an entry of a sum field, a float of a
    disclosed one."""
    return sum(v.size // 4 if v.dtype == np.uint64 else v.size
               for v in (np.asarray(x) for x in reply.values()))
