"""NKI's name= and a kernel's parameter names are free (nki.language.ndarray: the name is for debugging):
the names trnsim gives its builder's HBM tensors (an output's OUT/<name>.npy) never clash with an input's."""

import numpy as np

from runner import line_of, main, raises

import trnsim.nki as tnki
import nki
import nki.language as nl

X = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)


@nki.jit
def param_named_out(out):
    res = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(res, nl.add(nl.load(out), 1.0))
    return res


@nki.jit
def params_out_and_out_1(out, out_1):
    a = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    b = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(a, nl.add(nl.load(out), 1.0))
    nl.store(b, nl.multiply(nl.load(out_1), 2.0))
    return a, b


def test_an_unnamed_output_takes_the_first_name_no_parameter_has():
    # tester23q F3: a parameter called `out` made the unnamed output (named 'out' by default) fail with
    # "hbm tensor 'out' declared as output but it is already an input"; now it is 'out_1' (out + 1 each).
    got = tnki.simulate_kernel(param_named_out, X)
    assert np.array_equal(got, X + 1.0)
    assert tnki._jit.returned_names == ["out_1"], tnki._jit.returned_names
    a, b = tnki.simulate_kernel(params_out_and_out_1, X, X)
    assert np.array_equal(a, X + 1.0) and np.array_equal(b, X * 2.0)
    assert tnki._jit.returned_names == ["out_2", "out_3"], tnki._jit.returned_names


@nki.jit
def output_named_like_its_input(x):
    y = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm, name="x")
    nl.store(y, nl.add(nl.load(x), 1.0))
    return y


@nki.jit
def scratch_named_like_the_output_and_input(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm, name="o")
    s1 = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.hbm, name="o")
    s2 = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.hbm, name="a")
    nl.store(s1, nl.multiply(nl.load(a), 2.0))
    nl.store(s2, nl.add(nl.load(s1), 3.0))
    nl.store(out, nl.load(s2))
    return out


def test_a_name_an_input_has_is_given_to_a_distinct_tensor():
    # tester23q F2: name="x" on the output of a kernel taking x was refused ("hbm tensor 'x' declared as output
    # but it is already an input"), and so was an nl.hbm scratch named like the output or an input. Now the
    # output is saved as x_out.npy and the scratch tensors are the builder's 'o 2' and 'a 2'.
    got = tnki.simulate_kernel(output_named_like_its_input, X)
    assert np.array_equal(got, X + 1.0)
    assert tnki._jit.returned_names == ["x_out"], tnki._jit.returned_names
    got = tnki.simulate_kernel(scratch_named_like_the_output_and_input, X)
    assert np.array_equal(got, X * 2.0 + 3.0)  # through both scratch tensors
    assert tnki._jit.returned_names == ["o"], tnki._jit.returned_names


@nki.jit
def renamed_onto_anothers_name(a):
    first = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm, name="a")  # MARK-first
    second = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm, name="a_out")  # MARK-second
    t = nl.load(a)
    nl.store(first, t)
    nl.store(second, nl.multiply(t, 2.0))
    return first, second  # MARK-return-both


@nki.jit
def named_like_a_print(a):
    y = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm, name="device_print_0")  # MARK-like-print
    t = nl.load(a)
    nl.device_print("t", t)  # MARK-the-print
    nl.store(y, nl.multiply(t, 3.0))
    return y  # MARK-return-y


def test_a_name_another_outputs_file_takes_is_an_error_at_the_return_line():
    # tester23ab F3: `first` (name= the input's a, so saved as a_out.npy) took a_out.npy, and `second`, which
    # the kernel named a_out, was written as a_out_out.npy; an output named device_print_0 was written as
    # device_print_0_out.npy beside the print's own. Both silently, so OUT/<name>.npy held another tensor.
    here = "test_nki_output_names.py:%d"
    e = raises(tnki.NkiError, tnki.simulate_kernel, renamed_onto_anothers_name, X)
    assert str(e) == (
        (here + ": kernel renamed_onto_anothers_name returns first (allocated at " + here + ") named 'a', an "
         "input's name, which is saved as OUT/a_out.npy, and second (allocated at " + here + ") named 'a_out': "
         "give one of them another name=") % (line_of(__file__, "MARK-return-both"),
                                               line_of(__file__, "MARK-first"), line_of(__file__, "MARK-second"))
    ), str(e)
    e = raises(tnki.NkiError, tnki.simulate_kernel, named_like_a_print, X)
    assert str(e) == (
        (here + ": kernel named_like_a_print returns y (allocated at " + here + ") named 'device_print_0', the "
         "output that nl.device_print at " + here + " writes as OUT/device_print_0.npy: give it another name=")
        % (line_of(__file__, "MARK-return-y"), line_of(__file__, "MARK-like-print"),
           line_of(__file__, "MARK-the-print"))), str(e)


if __name__ == "__main__":
    main(globals())
