"""Slow, obviously-correct float64 reference for softalign, written straight from docs/spec.md.

Python loops over DP cells (each cell a (B,) tensor); gradients come from torch autograd.
Meant for small inputs only (B <= 4, M, N <= 12 or so).

    seed_loop(scores, gap_open=-1.0, temperature=1.0)            the seed's PyTorch loop, verbatim
    reference(scores, gap_open=-1.0, gap_extend=None, temperature=1.0,
              lengths_a=None, lengths_b=None, mode="local", reduction="max")
    smax(terms, t)                                                 the spec's smax_t over a list of tensors
    classic_sw / classic_nw / classic_gotoh_local / classic_gotoh_global
                                                                   plain-python hard DPs (t = 0)
"""
import math

import torch

NEG_INF = float("-inf")


# ----------------------------------------------------------------------------------------------
# The reference loop (docs/spec.md): the PyTorch loop that the default call must reproduce.
# ----------------------------------------------------------------------------------------------
def seed_loop(scores, gap_open=-1.0, temperature=1.0):
    """The seed's loop: H zeros (B, M+1, N+1); H[:, i, j] = t * logsumexp([0, match, delete,
    insert] / t); return H.view(B, -1).max(-1).values. Built from a list of lists so autograd works."""
    B, M, N = scores.shape
    zero = scores.new_zeros(B)
    H = [[zero for _ in range(N + 1)] for _ in range(M + 1)]
    for i in range(1, M + 1):
        for j in range(1, N + 1):
            match = H[i - 1][j - 1] + scores[:, i - 1, j - 1]
            delete = H[i - 1][j] + gap_open
            insert = H[i][j - 1] + gap_open
            stack = torch.stack([zero, match, delete, insert], dim=-1)
            H[i][j] = temperature * torch.logsumexp(stack / temperature, dim=-1)
    if B == 0:
        return zero
    Ht = torch.stack([torch.stack(row, dim=-1) for row in H], dim=1)  # (B, M+1, N+1)
    return Ht.reshape(B, -1).max(-1).values


# ----------------------------------------------------------------------------------------------
# smax_t (docs/spec.md, "Notation")
# ----------------------------------------------------------------------------------------------
def smax(terms, t):
    """smax_t over a list of same-shape tensors (reduced elementwise).

    t > 0: m + t*log(sum exp((x - m)/t)), m = max; gradient = softmax((x - m)/t).
    t == 0: hard max; the gradient goes entirely to the FIRST maximal term (list order).
    Every term -inf -> -inf with no gradient (never NaN). Any NaN term -> NaN.
    A +inf term -> +inf (t > 0: no gradient; t == 0: gradient to the first +inf term).
    """
    x = torch.stack(terms, dim=-1)
    xd = x.detach()
    if t == 0:
        idx = torch.argmax(xd, dim=-1, keepdim=True)  # first maximal index
        val = x.gather(-1, idx).squeeze(-1)
        val = torch.where(torch.isnan(xd).any(-1), torch.full_like(val, math.nan), val)  # NaN wins
    else:
        m = xd.max(-1).values  # NaN if any term is NaN
        ok = torch.isfinite(m)
        m_safe = torch.where(ok, m, torch.zeros_like(m))
        x_safe = torch.where(ok.unsqueeze(-1), x, torch.zeros_like(x))  # keeps dead rows' grads finite
        val = m_safe + t * torch.log(torch.exp((x_safe - m_safe.unsqueeze(-1)) / t).sum(-1))
        val = torch.where(ok, val, m)  # -inf / +inf / NaN rows: the max itself, no gradient
    all_dead = (xd == NEG_INF).all(-1)
    return torch.where(all_dead, torch.full_like(val, NEG_INF), val)  # docs/spec.md: all -inf -> -inf, no grad


# ----------------------------------------------------------------------------------------------
# Penalties (docs/spec.md, "Notation")
# ----------------------------------------------------------------------------------------------
class _Penalty:
    """A penalty broadcast to (B, M, N) (dims of size 1 kept even when M or N is 0), float64."""

    def __init__(self, name, value, B, M, N, device, mode):
        self.name = name
        if torch.is_tensor(value):
            g = value.to(device=device, dtype=torch.float64)  # differentiable cast
        else:
            g = torch.tensor(float(value), dtype=torch.float64, device=device)
        orig = tuple(g.shape)
        if g.dim() == 1:
            g = g.reshape(-1, 1, 1)  # docs/spec.md: a 1-D penalty is always one value per item
        try:  # must broadcast TO (B, M, N): rank <= 3 and the broadcast shape is (B, M, N) itself
            ok = g.dim() <= 3 and torch.broadcast_shapes(tuple(g.shape), (B, M, N)) == (B, M, N)
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(f"{name}: shape {orig} does not broadcast to (B, M, N) = {(B, M, N)}")
        g = g.reshape((1,) * (3 - g.dim()) + tuple(g.shape))
        if mode == "global" and ((M == 0 and g.shape[1] != 1) or (N == 0 and g.shape[2] != 1)):
            raise ValueError(f"{name}: global mode with M = 0 or N = 0 and a penalty that varies "
                             f"along that empty dimension (shape {orig}) has nothing to charge gaps with")
        Mx = max(M, 1) if g.shape[1] == 1 else M
        Nx = max(N, 1) if g.shape[2] == 1 else N
        self.g = g.expand(B, Mx, Nx)

    def at(self, i, j):
        # docs/spec.md: a gap move entering DP cell (i, j) is charged G[b, max(i,1)-1, max(j,1)-1]  -> (B,)
        return self.g[:, max(i, 1) - 1, max(j, 1) - 1]


# ----------------------------------------------------------------------------------------------
# The DP grids (docs/spec.md, "Linear gap", "Affine gap"), run over the full (M+1) x (N+1) grid for the
# whole batch; every cell is a (B,) tensor. Cell (i, j) depends only on cells (<= i, <= j), so an
# item of lengths (m, n) reads its result from the top-left block, exactly as if that block were
# the whole input (docs/spec.md, "Variable lengths"); cells outside the block never reach its score.
# ----------------------------------------------------------------------------------------------
def _dp_linear(S, g, t, mode):
    B, M, N = S.shape
    zero = S.new_zeros(B)
    H = [[None] * (N + 1) for _ in range(M + 1)]
    if mode == "local":
        for i in range(M + 1):
            H[i][0] = zero  # H[i][0] = 0
        for j in range(N + 1):
            H[0][j] = zero  # H[0][j] = 0
    else:
        H[0][0] = zero  # H[0][0] = 0
        for i in range(1, M + 1):
            H[i][0] = H[i - 1][0] + g.at(i, 0)  # H[i][0] = H[i-1][0] + g
        for j in range(1, N + 1):
            H[0][j] = H[0][j - 1] + g.at(0, j)  # H[0][j] = H[0][j-1] + g
    for i in range(1, M + 1):
        for j in range(1, N + 1):
            terms = [H[i - 1][j - 1] + S[:, i - 1, j - 1],  # match
                     H[i - 1][j] + g.at(i, j),              # vertical gap (consumes a)
                     H[i][j - 1] + g.at(i, j)]              # horizontal gap (consumes b)
            if mode == "local":
                terms = [zero] + terms  # local: smax_t(0, diag + S, up + g, left + g)
            H[i][j] = smax(terms, t)  # global: smax_t(diag + S, up + g, left + g)
    return H


def _dp_affine(S, o, e, t, mode):
    B, M, N = S.shape
    zero = S.new_zeros(B)
    ninf = S.new_full((B,), NEG_INF)
    A = [[ninf] * (N + 1) for _ in range(M + 1)]  # boundary states are -inf unless set below
    X = [[ninf] * (N + 1) for _ in range(M + 1)]
    Y = [[ninf] * (N + 1) for _ in range(M + 1)]
    if mode == "global":
        A[0][0] = zero  # A[0][0] = 0
        for i in range(1, M + 1):
            # column 0 holds only X: X[1][0] = o, then + e per row
            X[i][0] = o.at(i, 0) if i == 1 else X[i - 1][0] + e.at(i, 0)
        for j in range(1, N + 1):
            # row 0 holds only Y: Y[0][1] = o, then + e per column
            Y[0][j] = o.at(0, j) if j == 1 else Y[0][j - 1] + e.at(0, j)
    for i in range(1, M + 1):
        for j in range(1, N + 1):
            prev = [A[i - 1][j - 1], X[i - 1][j - 1], Y[i - 1][j - 1]]
            if mode == "local":
                prev = [zero] + prev  # local keeps the 0 start term; global drops it
            A[i][j] = S[:, i - 1, j - 1] + smax(prev, t)  # A = S + smax_t([0,] A, X, Y at (i-1, j-1))
            X[i][j] = smax([A[i - 1][j] + o.at(i, j),   # X = smax_t(A[i-1][j] + o, X[i-1][j] + e)
                            X[i - 1][j] + e.at(i, j)], t)
            Y[i][j] = smax([A[i][j - 1] + o.at(i, j),   # Y = smax_t(A[i][j-1] + o, X[i][j-1] + o,
                            X[i][j - 1] + o.at(i, j),   #            Y[i][j-1] + e)
                            Y[i][j - 1] + e.at(i, j)], t)
    return A, X, Y


# ----------------------------------------------------------------------------------------------
# Public reference
# ----------------------------------------------------------------------------------------------
def _lengths(name, lengths, B, limit, device):
    if lengths is None:
        return [limit] * B
    if not torch.is_tensor(lengths):
        lengths = torch.as_tensor(lengths)
    if lengths.dtype.is_floating_point or lengths.dtype.is_complex or lengths.dtype == torch.bool:
        raise TypeError(f"{name}: expected an integer tensor, got {lengths.dtype}")
    lengths = lengths.reshape(-1) if lengths.dim() == 0 else lengths
    if tuple(lengths.shape) != (B,):
        raise ValueError(f"{name}: expected shape ({B},), got {tuple(lengths.shape)}")
    out = [int(v) for v in lengths.tolist()]
    for v in out:
        if not 0 <= v <= limit:
            raise ValueError(f"{name}: values must lie in [0, {limit}], got {v}")
    return out


def reference(scores, gap_open=-1.0, gap_extend=None, temperature=1.0,
              lengths_a=None, lengths_b=None, mode="local", reduction="max"):
    """docs/spec.md in float64. Returns (B,) float64, or a 0-d tensor for a 2-D (M, N) input."""
    if mode not in ("local", "global"):
        raise ValueError(f"mode: expected 'local' or 'global', got {mode!r}")
    if reduction not in ("max", "soft"):
        raise ValueError(f"reduction: expected 'max' or 'soft', got {reduction!r}")
    t = float(temperature)
    if math.isnan(t) or t < 0:
        raise ValueError(f"temperature: expected a number >= 0, got {temperature}")
    if not torch.is_tensor(scores) or scores.dim() not in (2, 3):
        raise ValueError("scores: expected a tensor of shape (B, M, N) or (M, N)")
    if not scores.dtype.is_floating_point:
        raise TypeError(f"scores: expected a floating dtype, got {scores.dtype}")
    unbatched = scores.dim() == 2
    S = scores.to(torch.float64)  # differentiable cast
    if unbatched:
        S = S.unsqueeze(0)
    B, M, N = S.shape
    dev = S.device
    ma = _lengths("lengths_a", lengths_a, B, M, dev)
    nb = _lengths("lengths_b", lengths_b, B, N, dev)
    affine = gap_extend is not None
    o = _Penalty("gap_open", gap_open, B, M, N, dev, mode)
    e = _Penalty("gap_extend", gap_extend, B, M, N, dev, mode) if affine else None

    if affine:
        A, X, Y = _dp_affine(S, o, e, t, mode)
        V = A
    else:
        V = H = _dp_linear(S, o, t, mode)

    zero = S.new_zeros(())
    out = []
    for b in range(B):
        m, n = ma[b], nb[b]
        if mode == "local":
            # docs/spec.md, "Score": R({0} ∪ {V[i][j]}), the empty alignment first, then cells row-major;
            # m_b = 0 or n_b = 0 leaves only the 0
            cells = [zero] + [V[i][j][b] for i in range(1, m + 1) for j in range(1, n + 1)]
            out.append(smax(cells, 0 if reduction == "max" else t))
        elif affine:
            out.append(smax([A[m][n][b], X[m][n][b], Y[m][n][b]], t))  # smax_t(A, X, Y at (m, n))
        else:
            out.append(H[m][n][b])  # global linear score = H[m][n]
    res = torch.stack(out) if out else S.new_zeros((0,))
    return res[0] if unbatched else res


# ----------------------------------------------------------------------------------------------
# Classic hard algorithms in plain python (t = 0). Scores: list of lists; penalties: a number
# or a list of lists (M x N), charged at the entered cell like docs/spec.md.
# ----------------------------------------------------------------------------------------------
def _pen(p, i, j):
    return p[max(i, 1) - 1][max(j, 1) - 1] if isinstance(p, (list, tuple)) else p


def _dims(S):
    m = len(S)
    return m, (len(S[0]) if m else 0)


def classic_sw(S, gap):
    """Smith-Waterman, linear gap: max(0, best local alignment score)."""
    m, n = _dims(S)
    H = [[0.0] * (n + 1) for _ in range(m + 1)]
    best = 0.0
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            g = _pen(gap, i, j)
            H[i][j] = max(0.0, H[i - 1][j - 1] + S[i - 1][j - 1], H[i - 1][j] + g, H[i][j - 1] + g)
            best = max(best, H[i][j])
    return best


def classic_nw(S, gap, n=None):
    """Needleman-Wunsch, linear gap: global score H[m][n]. n is needed only when S has no rows."""
    m, n0 = _dims(S)
    n = n0 if n is None else n
    H = [[0.0] * (n + 1) for _ in range(m + 1)]
    for i in range(1, m + 1):
        H[i][0] = H[i - 1][0] + _pen(gap, i, 0)
    for j in range(1, n + 1):
        H[0][j] = H[0][j - 1] + _pen(gap, 0, j)
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            g = _pen(gap, i, j)
            H[i][j] = max(H[i - 1][j - 1] + S[i - 1][j - 1], H[i - 1][j] + g, H[i][j - 1] + g)
    return H[m][n]


def _gotoh(S, o, e, local, n=None):
    m, n0 = _dims(S)
    n = n0 if n is None else n
    A = [[NEG_INF] * (n + 1) for _ in range(m + 1)]
    X = [[NEG_INF] * (n + 1) for _ in range(m + 1)]
    Y = [[NEG_INF] * (n + 1) for _ in range(m + 1)]
    if not local:
        A[0][0] = 0.0
        for i in range(1, m + 1):
            X[i][0] = _pen(o, i, 0) if i == 1 else X[i - 1][0] + _pen(e, i, 0)
        for j in range(1, n + 1):
            Y[0][j] = _pen(o, 0, j) if j == 1 else Y[0][j - 1] + _pen(e, 0, j)
    best = 0.0
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            start = 0.0 if local else NEG_INF
            A[i][j] = S[i - 1][j - 1] + max(start, A[i - 1][j - 1], X[i - 1][j - 1], Y[i - 1][j - 1])
            oo, ee = _pen(o, i, j), _pen(e, i, j)
            X[i][j] = max(A[i - 1][j] + oo, X[i - 1][j] + ee)
            Y[i][j] = max(A[i][j - 1] + oo, X[i][j - 1] + oo, Y[i][j - 1] + ee)
            best = max(best, A[i][j])
    return best if local else max(A[m][n], X[m][n], Y[m][n])


def classic_gotoh_local(S, gap_open, gap_extend):
    """Gotoh local affine: max(0, best A cell)."""
    return _gotoh(S, gap_open, gap_extend, True)


def classic_gotoh_global(S, gap_open, gap_extend, n=None):
    """Gotoh global affine: max(A, X, Y at (m, n))."""
    return _gotoh(S, gap_open, gap_extend, False, n)


# ----------------------------------------------------------------------------------------------
# Self-check
# ----------------------------------------------------------------------------------------------
def _brute(S, o, e, t, mode):
    """Enumerate alignments explicitly (independent of the DP) and smax_t their scores.
    Linear (e None): every lattice path counted. Affine: no Y->X step; local alignments start and
    end with a match, plus the empty alignment. S, o, e: lists of lists."""
    m, n = _dims(S)
    scores = []

    def walk(i, j, last, acc, stop):
        if stop(i, j, last):
            scores.append(acc)
        if i < m and j < n:
            walk(i + 1, j + 1, "D", acc + S[i][j], stop)
        if i < m and (e is None or last != "H"):  # vertical gap; affine forbids Y -> X
            pen = _pen(o, i + 1, j) if (e is None or last != "V") else _pen(e, i + 1, j)
            walk(i + 1, j, "V", acc + pen, stop)
        if j < n:
            pen = _pen(o, i, j + 1) if (e is None or last != "H") else _pen(e, i, j + 1)
            walk(i, j + 1, "H", acc + pen, stop)

    if mode == "global":
        walk(0, 0, "D", 0.0, lambda i, j, last: (i, j) == (m, n))
    else:
        scores.append(0.0)
        for i0 in range(m):
            for j0 in range(n):
                walk(i0 + 1, j0 + 1, "D", S[i0][j0], lambda i, j, last: last == "D")
    mx = max(scores)
    return mx + t * math.log(sum(math.exp((s - mx) / t) for s in scores))


def _selfcheck():
    torch.manual_seed(0)
    close = lambda a, b, tol=1e-9: torch.allclose(a, b, atol=tol, rtol=tol)

    # 1. seed loop == reference (values and gradients), several temperatures
    for t in (1.0, 0.5, 2.0):
        S = torch.randn(3, 5, 7, dtype=torch.float64, requires_grad=True)
        r, s = reference(S, -1.0, temperature=t), seed_loop(S, -1.0, t)
        assert close(r, s), (t, r, s)
        gr, = torch.autograd.grad(r.sum(), S)
        gs, = torch.autograd.grad(s.sum(), S)
        assert close(gr, gs), t
        assert gr.min() >= 0 and gr.max() <= 1 + 1e-12

    # 2. t = 0 against the classic algorithms (integer scores, exact)
    rng = torch.Generator().manual_seed(1)
    for _ in range(20):
        M, N = torch.randint(1, 8, (2,), generator=rng).tolist()
        Si = torch.randint(-4, 5, (M, N), generator=rng).double()
        L = Si.tolist()
        assert reference(Si, -2.0, temperature=0).item() == classic_sw(L, -2.0)
        assert reference(Si, -2.0, temperature=0, mode="global").item() == classic_nw(L, -2.0)
        assert reference(Si, -3.0, -1.0, temperature=0).item() == classic_gotoh_local(L, -3.0, -1.0)
        assert (reference(Si, -3.0, -1.0, temperature=0, mode="global").item()
                == classic_gotoh_global(L, -3.0, -1.0))
        # affine with e == o equals linear at t = 0
        assert reference(Si, -2.0, -2.0, temperature=0).item() == classic_sw(L, -2.0)
        assert reference(Si, -2.0, -2.0, temperature=0, mode="global").item() == classic_nw(L, -2.0)
        # position-specific penalties against the classic versions
        O = (-torch.randint(1, 4, (M, N), generator=rng)).double()
        E = (-torch.randint(0, 2, (M, N), generator=rng)).double()
        assert reference(Si, O, temperature=0).item() == classic_sw(L, O.tolist())
        assert reference(Si, O, E, temperature=0, mode="global").item() == classic_gotoh_global(
            L, O.tolist(), E.tolist())
        # t = 0 gradient w.r.t. S is a 0/1 matrix of aligned pairs
        Sg = Si.clone().requires_grad_()
        gS, = torch.autograd.grad(reference(Sg, -3.0, -1.0, temperature=0, mode="global"), Sg)
        assert set(gS.unique().tolist()) <= {0.0, 1.0}

    # 3. soft scores against explicit enumeration of alignments (checks "each alignment counted once")
    for _ in range(5):
        S = torch.randn(3, 4, dtype=torch.float64)
        O = -torch.rand(3, 4, dtype=torch.float64) - 0.5
        E = -torch.rand(3, 4, dtype=torch.float64) * 0.5
        L, Ol, El = S.tolist(), O.tolist(), E.tolist()
        for t in (1.0, 0.3):
            assert abs(reference(S, O, temperature=t, mode="global").item() - _brute(L, Ol, None, t, "global")) < 1e-9
            assert abs(reference(S, O, E, temperature=t, mode="global").item() - _brute(L, Ol, El, t, "global")) < 1e-9
            assert abs(reference(S, O, E, temperature=t, reduction="soft").item() - _brute(L, Ol, El, t, "local")) < 1e-9

    # 4. gradcheck through every model with tensor penalties of several shapes
    B, M, N = 2, 3, 4
    S = torch.randn(B, M, N, dtype=torch.float64, requires_grad=True)
    pens = [torch.tensor(-1.0, dtype=torch.float64), -torch.rand(B, dtype=torch.float64) - 0.5,
            -torch.rand(M, N, dtype=torch.float64) - 0.5, -torch.rand(B, 1, N, dtype=torch.float64) - 0.5]
    for p in pens:
        p = p.clone().requires_grad_()
        q = (p.detach() * 0.3).requires_grad_()
        for mode, red in (("local", "max"), ("local", "soft"), ("global", "max")):
            f = lambda S, p: reference(S, p, temperature=0.7, mode=mode, reduction=red)
            assert torch.autograd.gradcheck(f, (S, p), fast_mode=True)
            f = lambda S, p, q: reference(S, p, q, temperature=0.7, mode=mode, reduction=red)
            assert torch.autograd.gradcheck(f, (S, p, q), fast_mode=True)

    S2 = torch.randn(2, 2, 3, dtype=torch.float64, requires_grad=True)
    p2 = (-torch.rand(2, 3, dtype=torch.float64) - 0.5).requires_grad_()
    q2 = (-torch.rand(2, 1, 1, dtype=torch.float64) * 0.5).requires_grad_()
    assert torch.autograd.gradcheck(lambda S, p, q: reference(S, p, q, 0.7, mode="global"), (S2, p2, q2))

    # 5. lengths: item b equals running on its top-left block (penalties indexed in full coordinates)
    S = torch.randn(4, 5, 6, dtype=torch.float64)
    O = -torch.rand(5, 6, dtype=torch.float64) - 0.5
    la, lb = torch.tensor([5, 0, 3, 2]), torch.tensor([6, 4, 1, 6])
    for mode in ("local", "global"):
        for ext in (None, O * 0.3):
            r = reference(S, O, ext, 0.5, la, lb, mode=mode)
            for b in range(4):
                m, n = la[b].item(), lb[b].item()
                mm, nn = max(m, 1), max(n, 1)  # keep one penalty row/column for an empty block
                blk = reference(S[b, :m, :n], O[:mm, :nn], None if ext is None else ext[:mm, :nn], 0.5,
                                mode=mode)
                assert close(r[b], blk), (mode, b)
    Sg = S.clone().requires_grad_()
    g, = torch.autograd.grad(reference(Sg, O, None, 0.5, la, lb).sum(), Sg)
    assert g[2, 3:].abs().sum() == 0 and g[2, :, 1:].abs().sum() == 0 and g[1].abs().sum() == 0

    # 6. empty shapes, unbatched, -inf / NaN handling
    assert reference(torch.zeros(0, 3, 4)).shape == (0,)
    assert reference(torch.zeros(2, 0, 4)).tolist() == [0.0, 0.0]
    assert reference(torch.zeros(2, 0, 4), -1.0, mode="global").tolist() == [-4.0, -4.0]
    assert reference(torch.zeros(2, 3, 0), -2.0, -0.5, mode="global").tolist() == [-3.0, -3.0]
    assert reference(torch.zeros(2, 0, 0), mode="global").tolist() == [0.0, 0.0]
    try:
        reference(torch.zeros(2, 0, 4), torch.zeros(0, 4), mode="global")
        raise AssertionError("expected an error naming gap_open")
    except ValueError as err:
        assert "gap_open" in str(err)
    assert reference(torch.randn(3, 4)).dim() == 0
    S = torch.randn(3, 4, 5, dtype=torch.float64)
    S[0, 1, 1] = float("-inf")
    S[1, 2, 2] = float("nan")
    for t in (0.0, 1.0):
        for ge in (None, -0.5):
            for mode in ("local", "global"):
                Sg = S.clone().requires_grad_()
                o = torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)
                r = reference(Sg, o, ge, t, mode=mode)
                assert torch.isnan(r[1]) and torch.isfinite(r[[0, 2]]).all(), (t, ge, mode, r)
                gS, go = torch.autograd.grad(r[[0, 2]].sum(), (Sg, o))
                assert torch.isfinite(gS).all() and torch.isfinite(go).all()
                assert gS[0, 1, 1] == 0
    # all -inf: smax is -inf with zero (not NaN) gradient
    x = torch.full((3,), NEG_INF, dtype=torch.float64, requires_grad=True)
    for t in (0.0, 1.0):
        y = smax(list(x.unbind()), t)
        assert y.item() == NEG_INF
        y.backward()
        assert x.grad.abs().sum() == 0
        x.grad = None
    # local with all -inf scores: zero gradient (affine: score exactly 0, no match is possible)
    Sg = torch.full((2, 3, 3), NEG_INF, dtype=torch.float64, requires_grad=True)
    for ge in (None, -0.5):
        r = reference(Sg, -1.0, ge, 1.0, reduction="soft")
        assert torch.isfinite(r).all() and (ge is None or r.tolist() == [0.0, 0.0])
        g, = torch.autograd.grad(r.sum(), Sg)
        assert g.abs().sum() == 0
    print("reference.py self-check passed")


if __name__ == "__main__":
    _selfcheck()
