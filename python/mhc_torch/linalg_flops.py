"""FLOPs of the dense linear algebra ops torch's flop counter leaves at 0 (a Cholesky factor, the
triangular solves, a symmetric eigendecomposition, an LU factor, an inverse): the counts of
Golub and Van Loan, Matrix Computations (4th ed.), for each matrix of a batch. A Gaussian
process's step (deep kernel learning, 4,096 points) counted its Cholesky factor, its two solves
and its backward's two triangular solves at 0 where they are 23 + 2 x 137 + 2 x 69 GFLOP."""
from __future__ import annotations

import math

import torch


def _batch(t: torch.Tensor) -> int:
    return math.prod(t.shape[:-2])


def _square(args, i=0):
    a = args[i] if len(args) > i else None
    if not isinstance(a, torch.Tensor) or a.dim() < 2:
        return None
    return a


def _solve(a: torch.Tensor, b: torch.Tensor) -> int:
    """n^2 flops per right-hand side (forward or back substitution with an n x n triangle); the
    right-hand sides are B's columns, or its rows where the triangle is on the right."""
    n = a.shape[-1]
    rhs = b.numel() // n if b.dim() >= 1 and n else 0
    return n * n * rhs


def flops(func, args, kwargs) -> int | None:
    """The op's FLOPs, or None where it is none of these."""
    name = func._overloadpacket.__name__
    kwargs = kwargs or {}
    if name in ("linalg_cholesky_ex", "cholesky") and _square(args) is not None:
        n = args[0].shape[-1]
        return _batch(args[0]) * n ** 3 // 3                       # Algorithm 4.2.1: n^3 / 3
    if name == "cholesky_solve" and _square(args, 1) is not None and isinstance(args[0], torch.Tensor):
        return 2 * _solve(args[1], args[0])                       # two triangular solves
    if name == "linalg_solve_triangular" and _square(args) is not None and isinstance(args[1], torch.Tensor):
        return _solve(args[0], args[1])                           # section 3.1: n^2 per right-hand side
    if name == "triangular_solve" and _square(args, 1) is not None and isinstance(args[0], torch.Tensor):
        return _solve(args[1], args[0])
    if name in ("_linalg_eigh", "linalg_eigh") and _square(args) is not None:
        n = args[0].shape[-1]
        vectors = args[2] if len(args) > 2 else kwargs.get("compute_v", True)
        # section 8.3: about 4n^3/3 for the eigenvalues alone (tridiagonalization), 9n^3 with the vectors
        return _batch(args[0]) * (9 * n ** 3 if vectors else 4 * n ** 3 // 3)
    if name in ("linalg_lu_factor_ex", "linalg_lu", "lu_factor") and _square(args) is not None:
        m, n = args[0].shape[-2], args[0].shape[-1]
        k = min(m, n)
        return _batch(args[0]) * (2 * m * n * k - (m + n) * k * k + 2 * k ** 3 // 3)   # 2n^3/3 when square
    if name == "linalg_inv_ex" and _square(args) is not None:
        n = args[0].shape[-1]
        return _batch(args[0]) * 2 * n ** 3                        # LU and the inverse from it
    return None
