"""NKI's dtype objects (nl.float32, nl.bfloat16, ...) as NKI 2.21-2.26 define them, NumPy dtypes: str() is the
dtype's name, which nki-library compares with 'bfloat16', 'float32', ... (tester23aa F6), and np.dtype() of
one gives its NumPy dtype, whose itemsize nki-samples' allocated attention reads (F5). Each test fails on
integ15's build."""

import numpy as np

from runner import bf16, main, raises

import trnsim.nki as tnki

import nki
import nki.language as nl

# (NKI dtype, str(), np.dtype(): its str() and itemsize)
TABLE = [
    (nl.float32, "float32", "float32", 4), (nl.float16, "float16", "float16", 2),
    (nl.int32, "int32", "int32", 4), (nl.uint32, "uint32", "uint32", 4), (nl.int16, "int16", "int16", 2),
    (nl.uint16, "uint16", "uint16", 2), (nl.int8, "int8", "int8", 1), (nl.uint8, "uint8", "uint8", 1),
    (nl.bool_, "bool", "bool", 1),
    # NumPy has no such type: raw bytes of the dtype's size.
    (nl.bfloat16, "bfloat16", "|V2", 2), (nl.float8_e4m3, "float8_e4m3", "|V1", 1),
    (nl.float8_e4m3fn, "float8_e4m3fn", "|V1", 1), (nl.float8_e5m2, "float8_e5m2", "|V1", 1),
    (nl.float8_e8m0fnu, "float8_e8m0fnu", "|V1", 1), (nl.float8_e4m3fn_x4, "float8_e4m3fn_x4", "|V4", 4),
    (nl.tfloat32, "tfloat32", "|V4", 4),
]


def resolve(dtype):
    # As nki-library's kernel helpers pick a dtype: by its str() (written for this test).
    return {"float32": nl.float32, "bfloat16": nl.bfloat16, "float16": nl.float16}[str(dtype)]


def test_str_is_the_dtype_name():
    for d, name, _, _ in TABLE:
        assert str(d) == name and f"{d}" == name, (str(d), name)
        assert repr(d) == "nl." + ("bool_" if name == "bool" else name), repr(d)  # trnsim's messages' spelling
    assert [resolve(d) for d in (nl.bfloat16, np.dtype(np.float16), nl.float32)] == [nl.bfloat16, nl.float16,
                                                                                     nl.float32]


def test_np_dtype_of_an_nki_dtype():
    for d, _, shown, itemsize in TABLE:
        nd = np.dtype(d)
        assert (str(nd), nd.itemsize) == (shown, itemsize), (d, nd, nd.itemsize)
        assert d == nd, (d, nd)  # and back: the same NKI dtype
    assert np.dtype(nl.float32) == np.float32 and np.dtype(nl.float32).kind == "f"
    assert np.dtype(nl.int8).kind == "i" and np.dtype(nl.uint16).kind == "u"


@nki.jit
def rounded(x, dt):
    # x [128, 256 // itemsize of dt] float32 through a tile of dt, declared with np.dtype(dt) as its dtype and
    # sized from its itemsize as nki-samples' allocated attention sizes its tiles (256 bytes per partition).
    n = 256 // np.dtype(dt).itemsize
    out = nl.ndarray((128, n), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, n), dtype=np.dtype(dt), buffer=nl.sbuf)
    t[...] = nl.load(x[:, :n])
    nl.store(out, nl.copy(t, dtype=nl.float32))
    return out


def test_np_dtype_in_a_kernel():
    # 1 + 2^-8 is a tie, rounded to even in bfloat16 (1); 1 + 3 * 2^-8 rounds up to 1 + 2^-6; float32 keeps both.
    x = np.tile(np.array([1.0, 1.00390625, 1.01171875, -2.0], np.float32), (128, 64))
    got = tnki.simulate_kernel(rounded, x, nl.bfloat16)
    assert got.shape == (128, 128) and got.tobytes() == bf16(x[:, :128]).tobytes()
    assert bf16(x[:1, 1:3]).tolist() == [[1.0, 1.015625]]
    got = tnki.simulate_kernel(rounded, x, nl.float32)
    assert got.shape == (128, 64) and got.tobytes() == x[:, :64].tobytes()


def test_an_array_of_raw_bytes_is_no_input():
    # np.zeros(shape, nl.bfloat16) holds raw bytes, not values: an input of it asks for nki.typed.
    e = raises(TypeError, tnki.simulate_kernel, rounded, np.zeros((128, 256), nl.bfloat16), nl.bfloat16)
    assert str(e) == ("rounded: argument x: an array of np.dtype(nl.bfloat16) holds bytes, not values: pass nki.typed(array, "
                      "nl.bfloat16) with float values (or the bits as unsigned integers)"), str(e)
    e = raises(TypeError, tnki.simulate_kernel, rounded, np.zeros((128, 256), "V2"), nl.bfloat16)
    assert str(e) == "rounded: argument x: a |V2 array has no Trainium dtype: convert it, or pass nki.typed(array, dtype)", str(e)


@nki.jit
def doubled(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(x), nl.load(y)))
    return out


def test_raw_bits_dtypes_ask_for_typed():
    # tester23ak F1 (silent): raw bfloat16 bits (benchmark().raw_outputs' uint16) passed back without nki.typed
    # ran as uint16 integers: 0x3F80 + 0x3F80 = 0x7F00, not 2.0. uint16 and uint8 are also how trnsim gives
    # the bits of bfloat16 / FP8, so an array of them needs nki.typed, at every entry point, naming the argument.
    bits = np.full((128, 64), 0x3F80, np.uint16)  # bfloat16 1.0
    u8 = np.full((128, 64), 0x44, np.uint8)  # float8_e4m3fn 3.0
    f = np.ones((128, 64), np.float32)
    u16_msg = ("doubled: argument %s: a uint16 array holds uint16 values, or the raw bits of bfloat16 or float16: "
               "pass nki.typed(array, nl.uint16) for its values, or nki.typed(array, nl.bfloat16) (or another of "
               "those) for bits")
    u8_msg = ("doubled: argument y: a uint8 array holds uint8 values, or the raw bits of float8_e4m3fn, float8_e5m2 "
              "or float8_e8m0fnu: pass nki.typed(array, nl.uint8) for its values, or nki.typed(array, "
              "nl.float8_e4m3fn) (or another of those) for bits")
    calls = [
        (tnki.simulate_kernel, (doubled, bits, f), {}, u16_msg % "x"),
        (tnki.simulate_kernel, (doubled, f), {"y": bits}, u16_msg % "y"),
        (tnki.benchmark, (doubled, f, u8), {}, u8_msg),
        (tnki.simulate_kernel, (doubled[1], bits, f), {}, u16_msg % "x"),
        (tnki.baremetal(doubled), (bits, f), {}, u16_msg % "x"),
        (tnki.benchmark(warmup=1, iters=1)(doubled), (f,), {"y": u8}, u8_msg),
    ]
    for fn, args, kwargs, msg in calls:
        e = raises(TypeError, fn, *args, **kwargs)
        assert str(e) == msg, (fn, str(e))
    # Typed, both readings run: the bits as bfloat16 1.0 (1 + 1 = 2), the values as uint16 (0x3F80 * 2).
    got = tnki.simulate_kernel(doubled, tnki.typed(bits, nl.bfloat16), tnki.typed(bits, nl.bfloat16))
    assert got.dtype == np.float32 and got.tobytes() == np.full((128, 64), 2.0, np.float32).tobytes()
    got = tnki.simulate_kernel(doubled, tnki.typed(bits, nl.uint16), tnki.typed(bits, nl.uint16))
    assert got.dtype == np.uint16 and got.tobytes() == np.full((128, 64), 0x7F00, np.uint16).tobytes()
    got = tnki.simulate_kernel(doubled, tnki.typed(u8, nl.float8_e4m3fn), tnki.typed(u8, nl.float8_e4m3fn))
    assert got.tobytes() == np.full((128, 64), 6.0, np.float32).tobytes(), got[0, :2]


if __name__ == "__main__":
    main(globals())
