"""NKI Type Promotion of a tile with a number (nki.api.shared, "Weakly Typed Scalar Type Inference"): a Python
bool, int or float is taken as the widest dtype the hardware has of its kind (uint8, int32, float32) and then
promoted with the tile's dtype by the pair rules, so `int8 tile + 2` is int32 and `bfloat16 tile + 1.5`
float32, while a float tile with an int keeps its float type (bfloat16 * 2 is bfloat16); a NumPy number has
its own dtype (np.int8(2), np.float16(2)); np.float64 and np.int64, which the engines have no dtype for, are
weak as Python's float and int. Before, the tile's dtype won for every int (int8 + 2 saturated at 127) and
for a float with a float tile (bf16 + 1.5 rounded to bf16). The bitvec operators keep the tile's dtype
(test_nki_isa_numpy's uint32 << 2)."""

import numpy as np

from runner import main

import trnsim.nki as tnki
import nki
import nki.language as nl

TILES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "float8_e4m3", "float8_e5m2", "bfloat16",
         "float16", "float32"]
NUMBERS = [2, 1.5, True, np.int8(2), np.uint8(2), np.float16(2), np.float32(2), np.float64(2), np.int64(2)]
F = ("float8_e4m3", "float8_e5m2", "bfloat16", "float16", "float32")

# The page's pair rules, written out per number (its dtype first): (float, int) the float; (float, float) the
# wider or a new widened type (float16 + bfloat16: float32); (int, int) the wider or a new widened type
# (int8 + uint8: int16, int32 + uint32: float32).
WANT = {
    "2 (int32)": dict(int8="int32", uint8="int32", int16="int32", uint16="int32", int32="int32",
                      uint32="float32", **{f: f for f in F}),
    "1.5 (float32)": dict({i: "float32" for i in TILES}),
    "True (uint8)": dict(int8="int16", uint8="uint8", int16="int16", uint16="uint16", int32="int32",
                         uint32="uint32", **{f: f for f in F}),
    "np.int8": dict(int8="int8", uint8="int16", int16="int16", uint16="int32", int32="int32", uint32="float32",
                    **{f: f for f in F}),
    "np.uint8": dict(int8="int16", uint8="uint8", int16="int16", uint16="uint16", int32="int32",
                     uint32="uint32", **{f: f for f in F}),
    "np.float16": dict({i: "float16" for i in TILES[:6]}, float8_e4m3="float16", float8_e5m2="float16",
                       bfloat16="float32", float16="float16", float32="float32"),
    "np.float32": dict({i: "float32" for i in TILES}),
}
WANT["np.float64 (weak)"] = WANT["1.5 (float32)"]
WANT["np.int64 (weak)"] = WANT["2 (int32)"]
COLUMNS = list(WANT)  # in NUMBERS' order

GOT = []


@nki.jit
def sums(x, numbers):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    GOT.append([nl.add(t, n).dtype.name for n in numbers] + [(t * 2).dtype.name, (1.5 * t).dtype.name])
    nl.store(out, t)
    return out


def test_every_tile_dtype_with_every_kind_of_number():
    assert len(COLUMNS) == len(NUMBERS)
    bad = []
    for name in TILES:
        del GOT[:]
        x = tnki.typed(np.zeros((128, 2), name) if name[0] in "iu" else np.zeros((128, 2), np.float32), name)
        tnki.simulate_kernel(sums, x, numbers=NUMBERS)
        (got,) = GOT
        want = [WANT[c][name] for c in COLUMNS] + [WANT["2 (int32)"][name], WANT["1.5 (float32)"][name]]
        bad += [(name, c, g, w) for c, g, w in zip(COLUMNS + ["t * 2", "1.5 * t"], got, want) if g != w]
    assert not bad, bad


@nki.jit
def plus(x, n, dtype=None):
    t = nl.add(nl.load(x), n, dtype=dtype)
    GOT.append(t.dtype.name)
    out = nl.ndarray(x.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


def test_int8_plus_two_is_int32():
    # 127 + 2 = 129 in int32 (it saturated to 127 in int8); -128 + 2 = -126 either way.
    x = np.array([[127, -128]] * 128, np.int8)
    got = tnki.simulate_kernel(plus, x, n=2)
    assert got.dtype == np.int32 and got.tobytes() == np.array([[129, -126]] * 128, np.int32).tobytes(), got[0]
    # np.int8(2) keeps int8: the sum saturates (the ALU computes 129 in FP32, the int8 write clamps it).
    got = tnki.simulate_kernel(plus, x, n=np.int8(2))
    assert got.dtype == np.int8 and got.tobytes() == np.array([[127, -126]] * 128, np.int8).tobytes(), got[0]


def test_bfloat16_plus_one_and_a_half_is_float32():
    # 256 + 1.5 = 257.5, a float32 value; bfloat16 (8 significant bits: a step of 2 at 256) would round it to
    # even, 258, as dtype=nl.bfloat16 still does. bfloat16 + 2 stays bfloat16 (a float tile with an int).
    # (simulate_kernel gives a bfloat16 output's values as float32.)
    x = tnki.typed(np.full((128, 2), 256.0, np.float32), nl.bfloat16)
    del GOT[:]
    for n, dtype, value in ((1.5, None, 257.5), (1.5, nl.bfloat16, 258.0), (2, None, 258.0)):
        got = tnki.simulate_kernel(plus, x, n=n, dtype=dtype)
        assert got.tobytes() == np.full((128, 2), value, np.float32).tobytes(), (n, dtype, got[0])
    assert GOT == ["float32", "bfloat16", "bfloat16"], GOT


@nki.jit
def negated(x):
    t = nl.negative(nl.load(x))
    u = nl.logical_not(nl.load(x))
    out = nl.ndarray((2,) + x.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nl.store(out[0], t)
    nl.store(out[1], u)
    return out


def test_unary_calls_keep_the_tile_dtype():
    # nl.negative and nl.logical_not default to their input's dtype (their pages); the number their lowering
    # multiplies or compares with is no operand of the kernel's (an int32 tile gave float32 before).
    x = np.array([[5, 0, -7]] * 128, np.int32)
    got = tnki.simulate_kernel(negated, x)
    want = np.stack([-x, (x == 0).astype(np.int32)])
    assert got.dtype == np.int32 and got.tobytes() == want.tobytes(), got[:, 0]


if __name__ == "__main__":
    main(globals())
