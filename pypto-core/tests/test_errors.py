"""Every error type: raised when it should be, with a message naming the problem and the fix."""

import numpy as np
import pytest

import pypto as pt
from pypto.testing import M, N, softmax, vector_add


def f32(*shape):
    return np.ones(shape, np.float32)


def test_error_hierarchy():
    for cls in (
        pt.TracingError,
        pt.DTypeError,
        pt.ShapeError,
        pt.AliasingError,
        pt.ArgumentError,
        pt.BackendNotFound,
        pt.BackendUnavailable,
        pt.CompileError,
        pt.PluginError,
    ):
        assert issubclass(cls, pt.PyptoError)
    assert issubclass(pt.DTypeError, TypeError) and issubclass(pt.ShapeError, ValueError)


# -- DTypeError ------------------------------------------------------------------------------------


def test_dtype_error_names_param_expected_got_fix():
    a = np.ones(4, np.float64)
    with pytest.raises(pt.DTypeError) as ei:
        vector_add(a, f32(4), f32(4))
    e = ei.value
    assert e.param == "a" and e.expected == "float32" and e.got == "float64"
    msg = str(e)
    assert "'a'" in msg and "float64" in msg and "float32" in msg and "astype(np.float32)" in msg


def test_dtype_error_unsupported_numpy_dtype():
    with pytest.raises(pt.DTypeError, match="float16"):
        vector_add(np.ones(3, np.float16), f32(3), f32(3))


def test_dtype_error_storing_float_into_int_needs_cast():
    @pt.kernel
    def bad(x: pt.Tensor[float, (N,)], y: pt.Tensor[int, (N,)]):
        i = pt.axis(0)
        y[i] = x[i] * 2

    with pytest.raises(pt.DTypeError, match=r"cannot store a float32 value into int32 tensor 'y'") as ei:
        bad.ir()
    assert "pt.cast" in str(ei.value) and "test_errors.py" in str(ei.value)


def test_dtype_error_scalar_argument():
    @pt.kernel
    def scale(x: pt.Tensor[float, (N,)], s: int, y: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        y[i] = x[i] * s

    with pytest.raises(pt.DTypeError, match="scalar 's' must be a int32 value, got float"):
        scale(f32(2), 1.5, f32(2))
    with pytest.raises(pt.DTypeError, match="does not fit in int32"):
        scale(f32(2), 2**40, f32(2))


# -- ShapeError ------------------------------------------------------------------------------------


def test_shape_error_dim_disagreement_names_both_arrays():
    with pytest.raises(pt.ShapeError) as ei:
        vector_add(f32(5), f32(6), f32(5))
    msg = str(ei.value)
    assert "b.shape[0] is 6" in msg and "N = 5 from a.shape[0]" in msg
    assert ei.value.param == "b" and ei.value.expected == 5 and ei.value.got == 6


def test_shape_error_explicit_dim_checked():
    with pytest.raises(pt.ShapeError, match=r"a.shape\[0\] is 5.*N = 4 from N=4 \(keyword\)"):
        vector_add(f32(5), f32(5), f32(5), N=4)


def test_shape_error_wrong_ndim():
    with pytest.raises(pt.ShapeError, match=r"'a' has 2 dimension\(s\).*expected 1"):
        vector_add(f32(2, 2), f32(4), f32(4))


def test_shape_error_axis_sizes_from_different_dims():
    @pt.kernel
    def k(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (M,)]):
        i = pt.axis(0)
        y[i] = x[i]

    with pytest.raises(pt.ShapeError, match=r"axis 'i' runs over y.shape\[0\] = 3 and also indexes x.shape\[0\] = 4"):
        k(f32(4), f32(3))


def test_shape_error_affine_index_out_of_bounds():
    @pt.kernel
    def shift(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (M,)]):
        i = pt.axis(0)
        y[i] = x[i + 1]

    shift(f32(5), f32(4))  # in bounds
    with pytest.raises(pt.ShapeError) as ei:
        shift(f32(4), f32(4))
    msg = str(ei.value)
    assert "index i + 1 of 'x' reaches 4, outside x.shape[0] = 4" in msg and "test_errors.py" in msg


def test_static_size_mismatch_is_a_tracing_error():
    @pt.kernel
    def k(x: pt.Tensor[float, (3,)], y: pt.Tensor[float, (4,)]):
        i = pt.axis(0)
        y[i] = x[i]

    with pytest.raises(pt.TracingError, match="which is smaller"):
        k.ir()


# -- AliasingError ---------------------------------------------------------------------------------


def test_pointwise_kernel_allows_output_equal_to_input():
    a = np.arange(4, dtype=np.float32)
    vector_add(a, a, a)
    np.testing.assert_array_equal(a, [0, 2, 4, 6])


def test_an_output_may_be_an_input_that_an_earlier_nest_reads_whole():
    """``x - x.mean()`` into x: the mean is complete (its own nest) before the store, which reads x where it
    writes; an update that reads the parameter again after writing it is still refused."""

    @pt.jit
    def center(x):
        return x - x.mean()

    x = np.arange(6, dtype=np.float32)
    center(x, out=x)
    np.testing.assert_array_equal(x, np.arange(6) - 2.5)

    @pt.jit
    def later(x):
        return x * 2, x.sum()  # the sum's nest runs after the store into x

    y = np.arange(4, dtype=np.float64)
    with pytest.raises(pt.AliasingError, match="output 'out0' overlaps input 'x'"):
        later(y, out=(y, np.zeros(())))
    np.testing.assert_array_equal(y, np.arange(4))


def test_aliasing_error_when_kernel_reads_other_points():
    @pt.kernel
    def smooth(x: pt.Tensor[float, (N + 1,)], y: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        y[i] = x[i] + x[i + 1]

    buf = np.arange(6, dtype=np.float32)
    with pytest.raises(pt.AliasingError) as ei:
        smooth(buf, buf[:5])
    msg = str(ei.value)
    assert "output 'y' overlaps input 'x'" in msg and "pt.empty_like(x)" in msg
    np.testing.assert_array_equal(buf, np.arange(6))  # nothing was written


def test_aliasing_error_partial_overlap_and_two_outputs():
    buf = np.arange(8, dtype=np.float32)
    with pytest.raises(pt.AliasingError, match="overlap without being the same array"):
        vector_add(buf[:4], f32(4), buf[2:6])

    @pt.kernel
    def two(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)], z: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        y[i] = x[i]
        z[i] = x[i] * 2.0

    out = np.zeros(3, np.float32)
    with pytest.raises(pt.AliasingError, match="both are outputs"):
        two(f32(3), out, out)


def test_aliasing_error_softmax_in_place():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(pt.AliasingError, match="inside a reduction"):
        softmax(x, x)


# -- ArgumentError ---------------------------------------------------------------------------------


def test_argument_errors():
    with pytest.raises(pt.ArgumentError, match=r"missing argument\(s\): c"):
        vector_add(f32(2), f32(2))
    with pytest.raises(pt.ArgumentError, match=r"takes 3 argument\(s\) \(a, b, c\) but 4 were given"):
        vector_add(f32(2), f32(2), f32(2), f32(2))
    with pytest.raises(pt.ArgumentError, match="unexpected keyword argument 'd'"):
        vector_add(f32(2), f32(2), f32(2), d=1)
    with pytest.raises(pt.ArgumentError, match="got argument 'a' twice"):
        vector_add(f32(2), f32(2), f32(2), a=f32(2))
    with pytest.raises(pt.ArgumentError, match="'b' is a scalar"):
        vector_add(f32(2), 1.0, f32(2))
    ro = f32(2)
    ro.flags.writeable = False
    with pytest.raises(pt.ArgumentError, match="output 'c' is read-only"):
        vector_add(f32(2), f32(2), ro)
    with pytest.raises(pt.ArgumentError, match="unknown IR stage"):
        vector_add.ir("nonsense")


# -- TracingError ----------------------------------------------------------------------------------


def test_tracing_error_python_while_points_at_line_with_hint():
    @pt.kernel
    def doubling(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        v = x[i]
        while v < 10:  # the offending line
            v = v * 2
        y[i] = v

    with pytest.raises(pt.TracingError) as ei:
        doubling.ir()
    e = ei.value
    assert e.loc is not None and e.loc.filename.endswith("test_errors.py")
    assert "the offending line" in str(e) and "n < max_iter" in str(e)  # (a per-element while needs a bound)


@pytest.mark.parametrize(
    "body,match",
    [
        (lambda x, y, i: [y.__setitem__(i, x[i]) for _ in range(int(x[i]))], "int()"),
        (lambda x, y, i: y.__setitem__(i, x[i] if bool(x[i]) else 0.0), "truth value|control flow"),
        (lambda x, y, i: y.__setitem__(i, float(x[i])), r"float\(\)"),
        (lambda x, y, i: y.__setitem__(i, x), "used as a value without an index"),
        (lambda x, y, i: y.__setitem__(i, x[i, i]), r"has 1 dimension\(s\) but is indexed with 2"),
        (lambda x, y, i: y.__setitem__(i, x[:]), "slices"),
        (lambda x, y, i: y.__setitem__(i, x[x[i]]), "index 0 has type float32, expected an integer type"),
        (lambda x, y, i: y.__setitem__(i, x[i] ** 0.5), "integer exponent"),
        (
            lambda x, y, i: y.__setitem__(i, x[i] + x[pt.axis(1)]),
            "appears on the right-hand side but not in the output",
        ),
        (lambda x, y, i: y.__setitem__(i, pt.reduce_sum(x[i], axis=1)), "not an iteration axis"),
        (lambda x, y, i: y.__setitem__(i, pt.reduce_sum(x[i], axis=pt.axis(3))), "does not depend on axis"),
        (lambda x, y, i: y.__setitem__(i, pt.where(x[i], 1.0, 0.0)), "condition has type float32, expected bool"),
        (lambda x, y, i: y.__setitem__(i, x[i] & x[i]), "applies to bool and integer"),
        (lambda x, y, i: [y.__setitem__(i, v) for v in x[i]], "iterating"),
        (lambda x, y, i: None, "stores nothing"),
    ],
    ids=[
        "int",
        "bool",
        "float",
        "unindexed",
        "arity",
        "slice",
        "float-index",
        "fractional-pow",
        "rhs-axis",
        "int-axis",
        "absent-axis",
        "where-cond",
        "float-and",
        "iterate",
        "no-store",
    ],
)
def test_tracing_errors(body, match):
    @pt.kernel
    def k(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
        body(x, y, pt.axis(0))

    with pytest.raises((pt.TracingError, pt.DTypeError), match=match):
        k.ir()


def test_tracing_error_signature_problems():
    def no_annotation(x, y: pt.Tensor[float, (N,)]):
        y[pt.axis(0)] = 1.0

    with pytest.raises(pt.TracingError, match="parameter 'x' has no type annotation"):
        pt.kernel(no_annotation).ir()

    def bad_annotation(x: list, y: pt.Tensor[float, (N,)]):
        y[pt.axis(0)] = 1.0

    with pytest.raises(pt.TracingError, match="annotated with"):
        pt.kernel(bad_annotation).ir()

    def returns(x: pt.Tensor[float, (N,)]):
        return x[pt.axis(0)]

    with pytest.raises(pt.TracingError, match="returned a value"):
        pt.kernel(returns).ir()

    K = pt.dim("K")

    def unbound_dim(x: pt.Tensor[float, (N,)]):
        x[pt.axis(0)] = K * 1.0

    with pytest.raises(pt.TracingError, match="dimension 'K' is used"):
        pt.kernel(unbound_dim).ir()


def test_tracing_error_store_with_colliding_points():
    @pt.kernel
    def k(x: pt.Tensor[float, (N, N)], y: pt.Tensor[float, (N,)]):
        i, j = pt.axis(0), pt.axis(1)
        y[i + j] = x[i, j]

    with pytest.raises(pt.TracingError, match="combines several axes"):
        k.ir()


def test_tracing_error_axis_extent_unknown():
    @pt.kernel
    def k(x: pt.Tensor[float, (N,)], y: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        y[2 * i] = x[2 * i]

    with pytest.raises(pt.TracingError, match="cannot infer the extent of axis 'i'"):
        k.ir()


def test_dim_and_annotation_validation():
    with pytest.raises(pt.TracingError):
        pt.dim("not a name")
    with pytest.raises(pt.TracingError, match="reserved"):
        pt.dim("float")
    with pytest.raises(pt.TracingError):
        pt.Tensor[float]
    with pytest.raises(pt.DTypeError, match="not a pypto data type"):
        pt.Tensor["quaternion", (N,)]
    with pytest.raises(pt.TracingError):
        pt.axis(-1)
    with pytest.raises(TypeError):
        pt.Tensor()


# -- BackendNotFound / BackendUnavailable ---------------------------------------------------------


def test_backend_not_found_lists_installed_and_pip_hint(monkeypatch):
    from pypto import plugins

    # a backend pypto knows the package of, but which is not installed here
    monkeypatch.setitem(plugins.KNOWN_PACKAGES, "fpga", "pypto-backend-fpga")
    k = pt.kernel(executor="fpga")(vector_add.fn)
    with pytest.raises(pt.BackendNotFound) as ei:
        k(f32(2), f32(2), f32(2))
    msg = str(ei.value)
    assert "executor 'fpga' is not an installed pypto backend" in msg
    assert "reference (available)" in msg and "pip install pypto-backend-fpga" in msg


def test_backend_not_found_suggests_close_name():
    k = pt.kernel(executor="refernce")(vector_add.fn)
    with pytest.raises(pt.BackendNotFound, match="Did you mean 'reference'"):
        k(f32(2), f32(2), f32(2))


def test_executor_must_be_a_string():
    with pytest.raises(pt.ArgumentError, match="executor must be a backend name"):
        pt.kernel(executor=3)(vector_add.fn)


def test_unknown_options_are_refused_with_close_matches():
    with pytest.raises(pt.ArgumentError, match="unknown option 'fastmth'; did you mean 'fastmath'") as ei:

        @pt.kernel(fastmth=True)
        def k(x: pt.Tensor[float, (4,)]):
            pass

    assert ei.value.param == "fastmth" and "executor, fastmath, schedule" in str(ei.value.expected)
    with pytest.raises(pt.ArgumentError, match="unknown option 'dimz'; did you mean 'dims'"):
        pt.jit(lambda x: x, dimz="symbolic")
    with pytest.raises(pt.ArgumentError, match="no installed backend reads it"):
        pt.jit(lambda x: x, colour="red")


def test_options_a_backend_declares_reach_its_programs(monkeypatch):
    import dataclasses

    from pypto.plugins import get_registry

    entry = get_registry().backends["reference"]
    caps = dataclasses.replace(entry.spec.capabilities, options=frozenset({"trace_launches"}))
    monkeypatch.setattr(entry, "spec", dataclasses.replace(entry.spec, capabilities=caps))

    @pt.kernel(executor="reference", trace_launches=True)
    def k(x: pt.Tensor[float, (4,)], y: pt.Tensor[float, (4,)]):
        i = pt.axis(0)
        y[i] = x[i]

    assert k.program().options.get("trace_launches") is True
    f = pt.jit(lambda x: x + 1, trace_launches=True)
    assert f.options["trace_launches"] is True
