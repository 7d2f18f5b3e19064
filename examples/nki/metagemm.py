"""result[M, N] = lhsT[K, M]^T @ rhs[K, N] (`metagemm`) or lhs[M, K] @ rhs[K, N] (`metagemm_lhs`) in BF16: the
NKI Python twin of kernels/calibration/metagemm (the port of nki-autotune's MetaGEMM template) in both its
layouts, our code. Tiles M 128, N 512, K 128; each axis has `tiles_per_block_*` tiles per block. Three block
loops in `loop_order` (outermost first); the loop at position p runs its axis' blocks if an operand loaded
deeper uses that axis, else once. lhs (or lhsT), rhs and the result are declared at their load positions
(inside the loops that enclose them) as one SBUF tensor each, zeroed, then filled tile by tile (the axes whose
loop encloses the position take their block's tiles, the others all their tiles); lhs (M on the partitions)
then has each tile transposed on the Tensor engine into PSUM and copied back in place. Innermost, each (m, n)
tile of the overlap gets its K tiles' matmuls in a PSUM tile, added into the result, which is stored when K's
position is left. Load positions: given, or the port's reading of the template's guidance (the innermost
position at or above the loop of the axis the operand lacks where it fits once; else, as every position
inside that loop loads the operand as often, the outermost at which the allocation rule gives it two buffers,
else the innermost). PSUM: the lhsT layout's matmul tile is declared in the loop (the allocation rule gives it
every free bank); in the lhs layout the port splits the banks, half for the matmul tiles and the rest for the
transposes, which the twin writes as two PSUM tensors with a block dim (one bank per block) rotated by index.
Compiled with the scheduler off (program order), as nki-autotune compiles its kernels.
"""

import copy

import nki
import nki.isa as nisa
import nki.language as nl

TILE = (128, 512, 128)  # M, N, K
M_, N_, K_ = 0, 1, 2
LHS_AXES, RHS_AXES = (M_, K_), (K_, N_)


class _Plan:
    def __init__(self, sizes, tpb, loop_order, lhs_position, rhs_position, sbuf_bytes):
        if sorted(loop_order) != ["K", "M", "N"]:
            raise ValueError(f"loop_order {loop_order!r} is not a permutation of MNK")
        self.tiles = [s // t for s, t in zip(sizes, TILE)]
        self.tpb = list(tpb)
        self.blocks = [t // b for t, b in zip(self.tiles, self.tpb)]
        self.order = ["MNK".index(c) for c in loop_order]
        self.pos = [0, 0, 0]
        for i, a in enumerate(self.order):
            self.pos[a] = i
        self.result = self.pos[K_]
        self.lhs = self.rhs = 0
        res_bytes = self.held(M_, self.result) * self.held(N_, self.result) * 512 * 2
        self.lhs = self.choose(lhs_position, 0, N_, lambda at: self.lhs_bytes(at) + res_bytes, sbuf_bytes)
        self.rhs = self.choose(rhs_position, 1, M_,
                               lambda at: self.lhs_bytes(self.lhs) + self.rhs_bytes(at) + res_bytes, sbuf_bytes)
        self.set_ranges()

    def set_ranges(self):
        self.range = []
        for q in range(3):
            a = self.order[q]
            uses = any(at > q and a in axes
                       for at, axes in ((self.lhs, LHS_AXES), (self.rhs, RHS_AXES), (self.result, (M_, N_))))
            self.range.append(self.blocks[a] if uses else 1)

    def rule_buffers(self, kind, sbuf_bytes):
        """Buffers the allocation rule (double buffering where two fit beside the later sites) gives site
        `kind` (0 lhs, 1 rhs, 2 result), the sites declared in turn, outer positions first."""
        sites = sorted([(self.lhs, 0, self.lhs_bytes(self.lhs)), (self.rhs, 1, self.rhs_bytes(self.rhs)),
                        (self.result, 2, self.held(M_, self.result) * self.held(N_, self.result) * 512 * 2)],
                       key=lambda t: t[0])
        used = 0
        for i, (at, k, size) in enumerate(sites):
            trips = 1
            for q in range(at):
                trips *= self.range[q]
            fit = max(0, sbuf_bytes - used - sum(t[2] for t in sites[i + 1:])) // size
            n = 1 if trips == 1 else max(1, min(2, trips, fit))
            if k == kind:
                return n
            used += n * size
        return 1

    def declarations(self, at):
        """Times an operand declared at position `at` is declared: the trip counts of the loops around it."""
        d = 1
        for q in range(at):
            d *= self.range[q]
        return d

    def absolute(self, r, axes):
        a, b = sorted((self.pos[axes[0]], self.pos[axes[1]]))
        return 0 if r == 0 else a + 1 if r == 1 else b + 1

    def held(self, axis, at):
        return self.tpb[axis] if self.pos[axis] < at else self.tiles[axis]

    def lhs_bytes(self, at):
        return self.held(M_, at) * self.held(K_, at) * 128 * 2

    def rhs_bytes(self, at):
        return self.held(K_, at) * self.held(N_, at) * 512 * 2

    def choose(self, given, kind, missing, bytes_at, sbuf_bytes):
        axes = LHS_AXES if kind == 0 else RHS_AXES
        if given is not None:
            return self.absolute(given, axes)
        best = twice = None
        for r in range(3):
            at = self.absolute(r, axes)
            if at <= self.pos[missing]:
                if bytes_at(at) <= sbuf_bytes:
                    best = at
                continue
            q = copy.copy(self)
            if kind == 0:
                q.lhs, q.rhs = at, self.absolute(2, RHS_AXES)
            else:
                q.rhs = at
            q.set_ranges()
            if twice is None and q.rule_buffers(kind, sbuf_bytes) >= 2:
                twice = at
        return best if best is not None else twice if twice is not None else self.absolute(2, axes)


def _metagemm(lhs, rhs, transposed, loop_order, tiles_per_block_m, tiles_per_block_n, tiles_per_block_k,
              lhs_position, rhs_position):
    K, M = lhs.shape if transposed else lhs.shape[::-1]
    N = rhs.shape[1]
    result = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm, name="result")
    sbuf_bytes = nl.tile_size.total_available_sbuf_size
    pl = _Plan((M, N, K), (tiles_per_block_m, tiles_per_block_n, tiles_per_block_k), loop_order,
               lhs_position, rhs_position, sbuf_bytes)
    var = [-1, -1, -1]  # current block of each axis (-1: no enclosing loop)
    st = {}  # the operands in SBUF: "L", "R", "O" -> (tile, first tile along M, N, K)
    psum = None
    if not transposed:
        # The port's PSUM split: the matmul tiles keep half the banks, the transposes get the others (each at
        # most one bank per tile it makes), each rotating over its banks in turn. Written as two PSUM tensors
        # with a block dim declared before the loops, one block per bank, indexed by a running count modulo
        # their blocks (NKI Beta 1's form: PSUM keeps its block dims in the NKI Block Dimension Migration Guide,
        # whose PSUM migration is still to come; trnsim gives each block alive its own bank; docs/nki.md,
        # "What differs from the Neuron compiler").
        banks = nl.tile_size.psum_num_banks
        lm, lk = pl.held(M_, pl.lhs), pl.held(K_, pl.lhs)
        om, on, rn = pl.held(M_, pl.result), pl.held(N_, pl.result), pl.held(N_, pl.rhs)
        mm_n = min(banks // 2, pl.declarations(3) * min(lm, om) * min(rn, on))
        tr_n = min(banks - mm_n, pl.declarations(pl.lhs) * lm * lk)
        psum = {"mm": nl.ndarray((mm_n, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum,
                                 name="result_tile"),
                "tr": nl.ndarray((tr_n, nl.par_dim(128), 128), dtype=nl.bfloat16, buffer=nl.psum, name="tileT"),
                "n": {"mm": 0, "tr": 0}}

    def psum_tile(kind):
        t, n = psum[kind], psum["n"][kind]
        psum["n"][kind] = n + 1
        return t[n % t.shape[0]]

    def first(axis, at):
        return var[axis] * pl.tpb[axis] if pl.pos[axis] < at else 0

    def init(at):
        if pl.lhs == at:
            lm, lk = pl.held(M_, at), pl.held(K_, at)
            # Partitions: K (lhsT) or M (lhs); the [128, 128] tile of (m, k) at t[:, ki, mi] or t[:, mi, ki].
            t = nl.ndarray((128, lk, lm, 128) if transposed else (128, lm, lk, 128), dtype=nl.bfloat16,
                           buffer=nl.sbuf)
            o = (first(M_, at), 0, first(K_, at))
            nisa.memset(dst=t, value=0.0)
            for mi in range(lm):
                for ki in range(lk):
                    m0, k0 = (o[M_] + mi) * 128, (o[K_] + ki) * 128
                    if transposed:
                        nisa.dma_copy(dst=t[:, ki, mi, :], src=lhs[k0:k0 + 128, m0:m0 + 128])
                    else:
                        nisa.dma_copy(dst=t[:, mi, ki, :], src=lhs[m0:m0 + 128, k0:k0 + 128])
            if not transposed:  # each tile transposed on the Tensor engine, copied back in place
                for mi in range(lm):
                    for ki in range(lk):
                        tp = psum_tile("tr")
                        nisa.nc_transpose(dst=tp, data=t[:, mi, ki, :])
                        nisa.tensor_copy(dst=t[:, mi, ki, :], src=tp)
            st["L"] = (t, o, lm, lk)
        if pl.rhs == at:
            rk, rn = pl.held(K_, at), pl.held(N_, at)
            t = nl.ndarray((128, rk, rn, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
            o = (0, first(N_, at), first(K_, at))
            nisa.memset(dst=t, value=0.0)
            for ki in range(rk):
                for ni in range(rn):
                    k0, n0 = (o[K_] + ki) * 128, (o[N_] + ni) * 512
                    nisa.dma_copy(dst=t[:, ki, ni, :], src=rhs[k0:k0 + 128, n0:n0 + 512])
            st["R"] = (t, o, rk, rn)
        if pl.result == at:
            om, on = pl.held(M_, at), pl.held(N_, at)
            t = nl.ndarray((128, om, on, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.memset(dst=t, value=0.0)
            st["O"] = (t, (first(M_, at), first(N_, at), 0), om, on)

    def matmuls():
        L, lo, lm, lk = st["L"]
        R, ro, rk, rn = st["R"]
        O, oo, om, on = st["O"]
        ms, me = max(lo[M_], oo[M_]), min(lo[M_] + lm, oo[M_] + om)
        ns, ne = max(ro[N_], oo[N_]), min(ro[N_] + rn, oo[N_] + on)
        ks, ke = max(lo[K_], ro[K_]), min(lo[K_] + lk, ro[K_] + rk)
        for m in range(ms, me):
            for n in range(ns, ne):
                ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) if transposed else psum_tile("mm")
                for kk in range(ks, ke):
                    st_ = L[:, kk - lo[K_], m - lo[M_], :] if transposed else L[:, m - lo[M_], kk - lo[K_], :]
                    nisa.nc_matmul(dst=ps, stationary=st_, moving=R[:, kk - ro[K_], n - ro[N_], :])
                o = O[:, m - oo[M_], n - oo[N_], :]
                nisa.tensor_tensor(dst=o, data1=o, data2=ps, op=nl.add)

    def store(at):
        if pl.result != at:
            return
        O, oo, om, on = st["O"]
        for mi in range(om):
            for ni in range(on):
                m0, n0 = (oo[M_] + mi) * 128, (oo[N_] + ni) * 512
                nisa.dma_copy(dst=result[m0:m0 + 128, n0:n0 + 512], src=O[:, mi, ni, :])

    init(0)
    for b0 in nl.affine_range(pl.range[0]):
        var[pl.order[0]] = b0
        init(1)
        for b1 in nl.affine_range(pl.range[1]):
            var[pl.order[1]] = b1
            init(2)
            for b2 in nl.affine_range(pl.range[2]):
                var[pl.order[2]] = b2
                init(3)
                matmuls()
            var[pl.order[2]] = -1
            store(2)
        var[pl.order[1]] = -1
        store(1)
    var[pl.order[0]] = -1
    store(0)
    return result


@nki.jit(additional_compile_opt="--enable-instruction-scheduling=false")
def metagemm(lhsT, rhs, loop_order="MNK", tiles_per_block_m=1, tiles_per_block_n=1, tiles_per_block_k=1,
             lhs_position=None, rhs_position=None):
    """The lhsT layout: lhsT[K, M] loaded as the matmuls' stationary tiles."""
    return _metagemm(lhsT, rhs, True, loop_order, tiles_per_block_m, tiles_per_block_n, tiles_per_block_k,
                     lhs_position, rhs_position)


@nki.jit(additional_compile_opt="--enable-instruction-scheduling=false")
def metagemm_lhs(lhs, rhs, loop_order="MNK", tiles_per_block_m=1, tiles_per_block_n=1, tiles_per_block_k=1,
                 lhs_position=None, rhs_position=None):
    """The lhs layout: lhs[M, K] loaded with M on the partitions, each tile transposed through PSUM."""
    return _metagemm(lhs, rhs, False, loop_order, tiles_per_block_m, tiles_per_block_n, tiles_per_block_k,
                     lhs_position, rhs_position)


def metagemm_ref(lhsT, rhs, **_):
    return lhsT.astype("float64").T @ rhs.astype("float64")


def metagemm_lhs_ref(lhs, rhs, **_):
    return lhs.astype("float64") @ rhs.astype("float64")
