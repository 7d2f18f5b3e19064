"""NKI kernels using nki.language.NkiTensor's view methods of NKI 2.33 (slice, select, squeeze_dim,
reshape_dim, flatten_dims, rearrange, get_pattern, vector_select, reinterpret_cast) and the earlier
nki.tensor's astype / assert_shape, for test_nki_tensor_methods.py. Written for this project."""

import nki
import nki.isa as nisa
import nki.language as nl

seen = {}  # values the kernels computed while tracing, for the test to compare


@nki.jit
def views(x):
    # x [128, 64] -> out [128, 64] made of pieces of several views of one tile.
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out[:, 0:16], nl.copy(t.slice(1, 8, 24)))                 # columns 8..23
    nl.store(out[:, 16:24], nl.copy(t.slice(1, 0, 64, 8)))             # every 8th column
    cube = t.reshape_dim(1, (8, -1))                                   # [128, 8, 8]
    nl.store(out[:, 24:32], nl.copy(cube.select(1, 3)))                # x[:, 24:32]
    one = cube.slice(1, 5, 6)                                          # [128, 1, 8]
    nl.store(out[:, 32:40], nl.copy(one.squeeze_dim(1)))               # x[:, 40:48]
    flat = cube.flatten_dims(1, 2)                                     # [128, 64] again
    # ('b', ('h', 'w')) -> ('b', 'w', 'h'): [128, 2, 4] of columns 48..55, transposed to [128, 4, 2].
    r = t.slice(1, 48, 56).rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 2})
    nl.store(out[:, 40:48], nl.copy(r).reshape((128, 8)))
    back = r.rearrange(("b", "w", "h"), ("b", ("h", "w")))             # [128, 8] in the original order
    nl.store(out[:, 48:56], nl.copy(back))
    nl.store(out[:, 56:64], nl.copy(flat.slice(1, 56, 64).reinterpret_cast(nl.int32).view(x.dtype)))
    seen["pattern"] = t.slice(1, 8, 24, 2).get_pattern()
    seen["contiguous"] = (t.is_contiguous(), t.slice(1, 0, 64, 2).is_contiguous(), r.is_contiguous(),
                          back.is_contiguous())
    seen["indirect"] = (t.is_indirect(), t.is_identity(), t.slice(1, 0, 8).is_identity())
    seen["shapes"] = (cube.shape, one.shape, r.shape, back.shape, t.assert_shape((128, 64)).shape)
    return out


@nki.jit
def ap_of_pattern(x):
    # .ap(t.get_pattern()) is the same view: the NKI docs' use of get_pattern.
    out = nl.ndarray((128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    v = t.slice(1, 1, 64, 2)
    nl.store(out, nl.copy(t.ap(v.get_pattern(), offset=1)))
    return out


@nki.jit
def casts(x):
    out = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x).astype(nl.bfloat16))  # one tensor_copy with the cast
    return out


@nki.jit
def selects(x, rows, row):
    # x [4, 128, 8]: x.select(0, row tile) (the block the [1, 1] tile names) and x[0].vector_select(0, rows).
    out = nl.ndarray((2, 128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    r = nl.load(row)
    nl.store(out[0], nl.load(x.select(0, r)))
    it = nl.load(rows)
    t = nl.ndarray((128, 8), dtype=x.dtype)
    nisa.dma_copy(dst=t, src=x[1].vector_select(0, it), dge_mode=nisa.dge_mode.swdge)
    nl.store(out[1], t)
    return out


@nki.jit
def tile_sizes(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    ts = nl.tile_size
    seen["tile_size"] = (ts.psum_min_align, ts.sbuf_min_align, ts.psum_num_banks, ts.psum_bank_fmax,
                         ts.psum_bank_fmax_bytes, ts.sbuf_size_bytes, ts.pmax)
    nl.store(out, nl.load(x))
    return out


@nki.jit
def bad(x, what):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    if what == "sim_value":
        t.sim_value  # noqa: B018  (NKI 2.30's; no value exists while tracing)
    elif what == "bogus":
        t.bogus  # noqa: B018
    elif what == "hasattr":
        seen["hasattr"] = (hasattr(t, "bogus"), hasattr(t, "slice"))
    elif what == "indirect":
        t.indirect(t)
    elif what == "assert_shape":
        t.assert_shape((128, 32))
    elif what == "squeeze":
        t.squeeze_dim(1)
    elif what == "flatten":
        t.reshape_dim(1, (8, 8)).permute((0, 2, 1)).flatten_dims(1, 2)
    elif what == "partition":
        t.squeeze_dim(0)
    elif what == "block":
        nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.psum).size  # noqa: B018
    elif what == "tile_size":
        nl.tile_size.bogus_fmax  # noqa: B018
    nl.store(out, t)
    return out
