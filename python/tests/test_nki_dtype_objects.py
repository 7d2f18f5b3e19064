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
    assert str(e) == ("an array of np.dtype(nl.bfloat16) holds bytes, not values: pass nki.typed(array, "
                      "nl.bfloat16) with float values (or the bits as unsigned integers)"), str(e)
    e = raises(TypeError, tnki.simulate_kernel, rounded, np.zeros((128, 256), "V2"), nl.bfloat16)
    assert str(e) == "a |V2 array has no Trainium dtype: convert it, or pass nki.typed(array, dtype)", str(e)


if __name__ == "__main__":
    main(globals())
