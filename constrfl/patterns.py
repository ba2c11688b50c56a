"""Numba kernels on sparse patterns for the sparse Hessians of ``inner="newton-basis"``
(docs/algorithms.md §5): a party's Gram pattern and the map from its row weights to
the pattern's entries (B4), and the server's principal submatrices of the parties'
triangles (B5).
Each is two passes (count, then fill) over the entries it keeps, in a fixed order."""
from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sps

__all__ = ["gram_pattern", "gram_weights", "principal_triangle"]


def gram_pattern(X_indptr, X_indices, d):
    """``(indptr, indices)``: the pattern of XᵀX's upper triangle (CSR, d × d, columns
    ascending in each row), X (rows × d) given by its CSR arrays; row a holds the
    columns b ≥ a of the rows that have an entry in column a."""
    by_column = np.argsort(X_indices, kind="stable")
    column_ptr = np.zeros(d + 1, dtype=np.int64)
    np.cumsum(np.bincount(X_indices, minlength=d), out=column_ptr[1:])
    row_of = np.repeat(np.arange(X_indptr.size - 1), np.diff(X_indptr))[by_column]
    indptr = np.zeros(d + 1, dtype=np.int64)
    mark = np.full(d, -1, dtype=np.int64)
    _union_rows(X_indptr, X_indices, column_ptr, row_of, mark, indptr[1:],
                np.empty(0, dtype=np.int64), False)
    np.cumsum(indptr, out=indptr)
    indices = np.empty(indptr[-1], dtype=np.int64)
    mark[:] = -1
    _union_rows(X_indptr, X_indices, column_ptr, row_of, mark, indptr[:-1].copy(), indices,
                True)
    return indptr, indices


@numba.njit(cache=True)
def _union_rows(X_indptr, X_indices, column_ptr, row_of, mark, cursor, indices, fill):
    """Row a of :func:`gram_pattern`: the union of the columns ≥ a of the rows
    ``row_of[column_ptr[a]:column_ptr[a + 1]]`` (``mark`` flags what row a has), counted
    into cursor[a], or written there and sorted where ``fill``."""
    for a in range(column_ptr.size - 1):
        start = cursor[a]
        for k in range(column_ptr[a], column_ptr[a + 1]):
            j = row_of[k]
            for p in range(X_indptr[j], X_indptr[j + 1]):
                b = X_indices[p]
                if b >= a and mark[b] != a:
                    mark[b] = a
                    if fill:
                        indices[cursor[a]] = b
                    cursor[a] += 1
        if fill:
            indices[start:cursor[a]] = np.sort(indices[start:cursor[a]])


def gram_weights(X_indptr, X_indices, X_data, indptr, indices):
    """The CSR matrix W (entries × rows) with Σ_j ω_j x_ja x_jb = (Wω)_e for the entry
    e = (a, b), a ≤ b, of the upper triangle's pattern (``indptr``, ``indices``: CSR,
    columns ascending in each row) of XᵀX, X given by its CSR arrays (columns ascending
    in each row); each entry's rows ascending."""
    n_rows = X_indptr.size - 1
    counts = np.zeros(indices.size + 1, dtype=np.int64)
    _walk_pairs(X_indptr, X_indices, X_data, indptr, indices, counts[1:],
                np.empty(0, dtype=np.int64), np.empty(0), False)
    np.cumsum(counts, out=counts)
    rows, values = np.empty(counts[-1], dtype=np.int64), np.empty(counts[-1])
    _walk_pairs(X_indptr, X_indices, X_data, indptr, indices, counts[:-1].copy(), rows,
                values, True)
    return sps.csr_matrix((values, rows, counts), shape=(indices.size, n_rows))


@numba.njit(cache=True)
def _walk_pairs(X_indptr, X_indices, X_data, indptr, indices, cursor, rows, values, fill):
    """For each row j and each pair p ≤ q of its entries, the pattern's entry e of
    (X_indices[p], X_indices[q]) (found by a forward walk along the pattern's row):
    cursor[e] += 1, after writing row j and x_p·x_q at cursor[e] where ``fill``."""
    for j in range(X_indptr.size - 1):
        for p in range(X_indptr[j], X_indptr[j + 1]):
            e = indptr[X_indices[p]]
            for q in range(p, X_indptr[j + 1]):
                while indices[e] != X_indices[q]:
                    e += 1
                if fill:
                    rows[cursor[e]], values[cursor[e]] = j, X_data[p] * X_data[q]
                cursor[e] += 1


def principal_triangle(parts, keep):
    """Σᵢ Uᵢ[keep, keep] for upper triangles Uᵢ (CSR) as one CSR matrix whose rows hold
    each part's entries in turn (duplicates stay: a product sums them).  ``U[keep][:,
    keep]`` and a sum cost 2 s a working set at d = 10⁵ (26M entries; measured, NP
    sparse L1)."""
    rows = np.flatnonzero(keep)
    new = np.full(keep.size, -1, dtype=np.int64)
    new[rows] = np.arange(rows.size)
    indptr = np.zeros(rows.size + 1, dtype=np.int64)
    for U in parts:
        _count_kept(U.indptr, U.indices, rows, new, indptr[1:])
    np.cumsum(indptr, out=indptr)
    cursor, indices = indptr[:-1].copy(), np.empty(indptr[-1], dtype=np.int64)
    data = np.empty(indptr[-1])
    for U in parts:
        _gather_kept(U.indptr, U.indices, U.data, rows, new, cursor, indices, data)
    return sps.csr_matrix((data, indices, indptr), shape=(rows.size, rows.size))


@numba.njit(cache=True)
def _count_kept(indptr, indices, rows, new, counts):
    for r in range(rows.size):
        for k in range(indptr[rows[r]], indptr[rows[r] + 1]):
            if new[indices[k]] >= 0:
                counts[r] += 1


@numba.njit(cache=True)
def _gather_kept(indptr, indices, data, rows, new, cursor, out_indices, out_data):
    for r in range(rows.size):
        p = cursor[r]
        for k in range(indptr[rows[r]], indptr[rows[r] + 1]):
            j = new[indices[k]]
            if j >= 0:
                out_indices[p], out_data[p] = j, data[k]
                p += 1
        cursor[r] = p

