"""The SIMT renderer: how loop-IR shapes become device kernels, and the host's launch plan.

These tests read the generated source and evaluate the plan on the host; running the kernels is
the GPU backends' business (their tests compare results with NumPy on a device).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import pypto as pt
from pypto.ir.loops import Var
from pypto.ir.nodes import Binary, Const
from pypto.targets.simt.plan import COLUMNS, GROUPS, MAP, SINGLE, TILES, LaunchPlan, py_expr
from pypto.targets.simt.render import SimtRenderer
from pypto.testing import M, N, matmul, softmax, sum_exp, vector_add


@pt.kernel
def column_sum(x: pt.Tensor[float, (M, N)], out: pt.Tensor[float, (N,)]):
    i, j = pt.axis(0), pt.axis(1)
    out[j] = pt.reduce_sum(x[i, j], axis=i)


@pt.kernel
def reverse(x: pt.Tensor[int, (N,)]):
    i = pt.axis(0)
    x[i] = x[N - 1 - i]


@pt.kernel
def two_totals(x: pt.Tensor[float, (N,)], s: pt.Tensor[float, (1,)], m: pt.Tensor[float, (1,)]):
    i = pt.axis(0)
    s[0] = pt.reduce_sum(x[i], axis=i)
    m[0] = pt.reduce_max(x[i], axis=i) + s[0]


@pt.kernel
def int_ops(a: pt.Tensor[int, (N,)], b: pt.Tensor[int, (N,)], c: pt.Tensor[int, (N,)]):
    i = pt.axis(0)
    c[i] = a[i] * b[i] + a[i] // b[i] - abs(b[i])


@pt.kernel
def transpose(x: pt.Tensor[float, (M, N)], y: pt.Tensor[float, (N, M)]):
    r, c = pt.axis(0), pt.axis(1)
    y[c, r] = x[r, c] * 2.0


def simt_loops(kernel):
    """The loop IR a simt backend receives for ``kernel`` (after the simt target's passes)."""
    from pypto.plugins import get_target

    return kernel.compilation(target="simt").for_target(get_target("simt"))


def render(kernel, lanes=1, **settings):
    """The device code and plan for ``kernel``; ``lanes`` as a target's pass would record them (OpenCL's on CPUs)."""
    import dataclasses

    r = SimtRenderer()
    for key, value in settings.items():
        setattr(r, key, value)
    from pypto.targets.simt.launch import place_barriers

    k = simt_loops(kernel)  # barriers placed again for the vector width, as after a target's lanes pass
    return r.render_device(place_barriers(dataclasses.replace(k, device=dataclasses.replace(k.device, lanes=lanes))))


def kinds(plan: LaunchPlan) -> list[str]:
    return [k.kind for k in plan.kernels]


# -- how loop nests map onto kernels ------------------------------------------------------------------


def test_elementwise_is_one_map_kernel_over_an_ndrange():
    source, plan = render(vector_add)
    assert kinds(plan) == [MAP]
    (k,) = plan.kernels
    assert k.params == ("a", "b", "c", "N") and k.extents == ("(v_N - 0)",)
    assert "__kernel void vector_add_k0(__global const float *restrict a" in source
    assert "if ((long)get_global_id(0) >= N - 0) return;" in source
    assert "barrier" not in source


def test_grid_stride_loops_when_the_language_prefers_them():
    source, _ = render(vector_add, grid_stride=True)
    assert "for (long pt_g0 = (long)get_global_id(0); pt_g0 < N - 0; pt_g0 += (long)get_global_size(0))" in source


def test_row_reductions_get_one_group_per_row_and_a_tree_in_local_memory():
    source, plan = render(softmax)
    short = [k for k in plan.kernels if k.when and k.when.startswith("(not")]
    (k,) = short
    assert k.kind == GROUPS and k.extents == ("(v_M - 0)",) and k.hint == "(v_N - 0)"
    body = source.split(f"void {k.name}(")[1].split("\n}\n")[0]
    assert "for (long row = 0 + (long)get_group_id(0); row < M; row += (long)get_num_groups(0))" in body
    assert body.count("col < N; col += pt_L") == 3  # max, exp + sum, scale: the group shares each row
    assert "pt_group_max_f32(max_" in body and "pt_group_sum_f32(sum_" in body
    # a thread re-reads only what it wrote: the one barrier outside the group reductions opens each row
    head = "row += (long)get_num_groups(0)) {\n        barrier(CLK_LOCAL_MEM_FENCE);\n"
    assert body.replace("pt_group_", "").count("barrier") == 1 and head in body
    assert "inline float pt_max_f32(float a, float b) { return (a > b || a != a) ? a : b; }" in source
    assert "for (long h = n >> 1; h > 0; h >>= 1)" in source


def test_rows_that_fit_are_cached_in_local_memory_in_a_variant():
    source, plan = render(softmax)
    (k,) = [k for k in plan.kernels if k.cached is not None]
    rows = k.cached
    assert {b.name for b in rows.local} == {"pt_scratch", "pt_row_x", "pt_row_y"}
    body = source.split(f"void {rows.name}(")[1].split("\n}\n")[0]
    assert body.count("x[row * N + col]") == 1  # x is read from global memory once
    assert body.count("y[row * N + col] =") == 1  # y is written once, by the last loop
    assert "pt_row_y[col] = t" in body


def test_long_rows_take_the_online_variant_chosen_on_the_host():
    _, plan = render(softmax)
    conds = sorted(k.when for k in plan.kernels)
    assert conds == ["(((v_N * 4) >= 524288))", "(not ((v_N * 4) >= 524288))"]
    sizes = plan.sizer()([3, 8])
    assert sizes.active == (False, True)
    sizes = plan.sizer()([3, 200_000])
    assert sizes.active == (True, False)


def test_full_reduction_is_two_deterministic_stages():
    source, plan = render(sum_exp)
    assert kinds(plan) == [GROUPS, SINGLE]
    (part,) = plan.buffers
    assert part.name.startswith("_partial") and part.dtype == "float32"
    sizes = plan.sizer()([100_000])
    assert sizes.buffers == (7,) and sizes.extents[0] == (7,)  # blocks of 16384
    assert sizes.hints == (16384, 7)
    combine = source.split("void sum_exp_k1(")[1]
    assert "_b9 < _nblocks2; _b9 += pt_L" in combine  # the ordered combine is shared by one group
    assert "if (pt_lid == 0) out[0] = sum_" in combine


def test_a_matmul_runs_in_work_groups_over_tiles_of_outputs():
    source, plan = render(matmul)
    assert kinds(plan) == [TILES]
    (launch,) = plan.kernels
    assert launch.extents == ("(v_N - 0)", "(v_M - 0)") and launch.group == (16, 16)
    assert "__local float pt_ta[272];" in source and source.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    assert "const long i = 0 + (long)get_group_id(1) * 16 + pt_ty;" in source
    assert "sum_1 = sum_1 + pt_ta[pt_ty * 17 + pt_kk] * pt_tb[pt_kk * 17 + pt_tx];" in source
    assert "if (i < M & j < N) {" in source  # threads outside the matrix load zeros and write nothing
    assert LaunchPlan.from_json(plan.to_json()) == plan


def test_reductions_down_columns_run_in_groups_of_columns_splitting_the_rows():
    source, plan = render(column_sum)
    assert kinds(plan) == [COLUMNS]
    (launch,) = plan.kernels
    assert launch.group == (32, 8) and launch.extents == ("(v_N - 0)", "8")
    assert "for (long i = 0 + pt_ty; i < M; i += 8) {" in source  # consecutive threads: consecutive columns
    assert source.index("barrier(CLK_LOCAL_MEM_FENCE);") < source.index("if (pt_ty == 0 && j < N) {")
    assert "sum_1 = sum_1 + pt_part_sum_1[pt_s * 32 + pt_tx];" in source  # the 8 partials of a column combined in order


def test_temporaries_are_device_buffers_sized_by_the_host():
    source, plan = render(reverse)
    assert kinds(plan) == [MAP, MAP]
    (t,) = plan.buffers
    assert t.dtype == "int32" and plan.sizer()([5]).buffers == (5,)
    assert "__global int *restrict _t0" in source


def test_values_written_by_one_kernel_are_seen_by_the_next():
    source, plan = render(two_totals)
    assert kinds(plan) == [GROUPS, SINGLE, GROUPS, SINGLE]
    last = source.split("void two_totals_k3(")[1]
    assert "s[0]" in last  # read back from the output written by an earlier kernel


def test_integer_arithmetic_wraps_and_never_traps():
    source, _ = render(int_ops)
    assert "as_int((uint)(t1) * (uint)(t2))" in source
    assert "if (b == 0) return 0;" in source and "as_int((uint)0 - (uint)(a))" in source


# -- lane vectors (CPU OpenCL) -----------------------------------------------------------------------------


def test_lanes_vectorise_contiguous_loops_and_keep_a_scalar_tail():
    source, plan = render(softmax, lanes=16)
    body = source.split("void softmax_k1(")[1].split("\n}\n")[0]
    assert "vload16(0, x + row * N + col)" in body and "vstore16(t" in body
    assert "exp((vload16(0, x + row * N + col) - ((float16)(max_" in body
    assert "pt_lanes_sum_float16(sum_" in body
    assert body.count("pt_nv * 16 + pt_lid; col < N; col += pt_L") == 3
    src, plan = render(vector_add, lanes=16)
    assert plan.kernels[0].width == 16 and "vstore16(((float16)(a[i] + b[i]))" not in src
    assert "vstore16((vload16(0, a + i) + vload16(0, b + i)), 0, c + i);" in src


def test_lanes_fall_back_to_scalar_code_for_strided_access():
    source, plan = render(transpose, lanes=16)
    assert plan.kernels[0].width == 1 and "vload" not in source


# -- the plan on the host ----------------------------------------------------------------------------------


def test_split_kernels_records_the_device_kernels_as_data():
    from pypto.ir.printer import format_loops
    from pypto.targets.simt.split import split_kernels

    loops = split_kernels(softmax.program(backend="reference").loops)
    steps = loops.device.steps
    assert [st.loop.var for st in steps] == ["row", "row"]  # the online and the per-row variant
    (cond, holds), (cond2, holds2) = steps[0].when[0], steps[1].when[0]
    assert cond == cond2 and (holds, holds2) == (True, False)
    assert py_expr(cond, {"N": "v_N"}) == "((v_N * 4) >= 524288)"
    text = format_loops(loops)
    assert "softmax_k0: parallel loop over row  when ((N * 4) >= 524288)" in text
    assert "softmax_k1: parallel loop over row  when not ((N * 4) >= 524288)" in text
    full = split_kernels(sum_exp.program(backend="reference").loops).device
    assert [st.loop is None for st in full.steps] == [False, True] and [t[0] for t in full.temps] == ["_partial3"]
    # the renderer prints the recorded split and plan; it refuses loop IR the target's passes have not planned
    from pypto.targets.simt.launch import place_barriers, plan_launch

    r1, r2 = SimtRenderer(), SimtRenderer()
    assert r1.render_device(place_barriers(plan_launch(loops))) == r2.render_device(simt_loops(softmax))
    with pytest.raises(ValueError, match="has not been through the simt target's passes"):
        SimtRenderer().render_device(loops)


def test_plan_launch_records_how_each_device_kernel_runs():
    from pypto.ir.device import StepLaunch
    from pypto.ir.printer import format_loops
    from pypto.targets.simt.launch import plan_launch

    def launches(kernel):
        return [st.launch for st in plan_launch(kernel.program(backend="reference").loops).device.steps]

    n, m = Var("N", dtype=pt.int64), Var("M", dtype=pt.int64)
    zero = Const(0, dtype=pt.int64)

    def trip(v):  # a loop from 0 to v: v - 0 iterations
        return Binary("sub", v, zero, dtype=pt.int64)

    assert launches(vector_add) == [StepLaunch(MAP, map_dims=1, vector_loops=((0, "i"),), extents=(trip(n),))]
    (mm,) = launches(matmul)  # a contraction: tiles in local memory, 16 x 16 threads a tile
    assert (mm.kind, mm.map_dims, mm.group, mm.register_tile) == (TILES, 2, (16, 16), 1)
    (cs,) = launches(column_sum)  # a group per block of columns, its threads split the rows
    assert cs == StepLaunch(COLUMNS, extents=(trip(n), Const(8, dtype=pt.int64)), group=(32, 8))
    online, rows = launches(softmax)
    assert rows.kind == GROUPS and rows.cached_rows == ("x", "y")
    assert rows.extents == (trip(m),) and rows.hint == trip(n)  # a group per row; its threads share the row
    assert [v for _, v in rows.vector_loops] == ["col", "col", "col"]
    assert [x.kind for x in launches(sum_exp)] == [GROUPS, SINGLE]
    assert launches(transpose)[0].vector_loops == ()  # x is read across rows: no vector form
    # the printer shows the choice; the renderer prints exactly it
    text = format_loops(plan_launch(softmax.program(backend="reference").loops))
    assert ("[groups; extents (M - 0); shared elements (N - 0); rows kept in local memory: x, y; "
            "vector form: col (#0), col (#1), col (#2)]") in text  # fmt: skip
    _, plan = render(softmax)
    assert [k.kind for k in plan.kernels] == [online.kind, rows.kind] and plan.kernels[1].cached is not None

    # a loop without a vector form stays scalar even where a loop of the same name has one
    @pt.kernel
    def counts(x: pt.Tensor[float, (M, N)], pos: pt.Tensor[int, (M,)], total: pt.Tensor[float, (M,)]):
        r, c = pt.axis(0), pt.axis(1)
        pos[r] = pt.reduce_sum(x[r, c] > 0, axis=c)
        total[r] = pt.reduce_sum(x[r, c], axis=c)

    (launch,) = launches(counts)
    assert launch.kind == GROUPS and launch.vector_loops == ((1, "c"),)
    source, _ = render(counts, lanes=8)
    body = source.split("void counts_k0(")[1].split("\n}\n")[0]
    assert body.count("vload8(") == 1


def test_plan_launch_decides_without_printing():
    """The pass answers its questions from the loop IR (pypto.targets.simt.forms): the SIMT printer is not even
    imported while a kernel goes through the simt target's passes."""
    import subprocess
    import sys

    code = (
        "import sys, pypto as pt\n"
        "from pypto.testing import softmax, sum_exp, matmul, vector_add\n"
        "for k in (softmax, sum_exp, matmul, vector_add):\n"
        "    k.compilation(target='simt').for_target(__import__('pypto.plugins').plugins.get_target('simt'))\n"
        "assert 'pypto.targets.simt.render' not in sys.modules, 'the printer was imported'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_why_a_loop_has_no_vector_form():
    from pypto.targets.simt.forms import StepForms

    loops = simt_loops(transpose)
    forms = StepForms(loops)
    (step,) = loops.device.steps
    inner = forms.map_chain(step.loop)[-1]
    assert forms.lane_form(inner.body, inner.var) == "lane vectors: 'x' is not read contiguously"
    loops = simt_loops(vector_add)
    (step,) = loops.device.steps
    assert StepForms(loops).lane_form(step.loop.body, step.loop.var) is None


def test_barriers_are_placed_by_a_pass_and_printed_where_it_says():
    """A scan's ordered combine (one group) reads in each step what the step before wrote, and the first thread
    overwrites the element every thread has just read: the loop every thread runs ends with a barrier, and one
    stands before that write (else a thread may read the new value: a race PoCL turned into wrong sums), recorded
    by place_barriers, shown by the IR printer and printed at those places."""
    from pypto.ir.device import Barriers

    @pt.kernel
    def running(x: pt.Tensor[float, (N,)], s: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        s[i] = pt.cumsum(x[i], axis=i)

    loops = simt_loops(running)
    combine = [st for st in loops.device.steps if st.loop is None]
    (step,) = combine
    assert step.launch.barriers == Barriers(((1, 0, 0, 0, 1),), ((1,),))
    assert "[single group; barriers: before 1.0.0.0.1; ending loop 1]" in running.ir("place_barriers", backend="opencl")
    source, _ = render(running)
    body = source.split(f"void {loops.name}_k1(")[1].split("\n}\n")[0]
    assert body.count("barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);") == 2
    write = body.index("if (pt_lid == 0) _block")
    assert body.rindex("barrier(", 0, write) > body.index("= _block")  # after every thread's read, before the write
    # the printer refuses a split whose barriers were not placed
    from pypto.targets.simt.launch import plan_launch

    with pytest.raises(ValueError, match="place_barriers"):
        SimtRenderer().render_device(plan_launch(running.program(backend="reference").loops))


def test_generated_code_is_the_same_in_every_process():
    """Device code (and so the compile cache's key) does not depend on Python's string hashing."""
    import os
    import subprocess
    import sys

    code = (  # softmax of a 1 x 1 array: five scalars pass from one device kernel to the next
        "import numpy as np, pypto as pt\n"
        "from pypto.targets.simt.render import SimtRenderer\n"
        "from pypto.plugins import get_target\n"
        "f = pt.jit(lambda x: (pt.softmax(x, dim=-1), pt.log_softmax(x, dim=-1), pt.softmax(x, dim=0)))\n"
        "k = f.kernel(np.ones((1, 1))).compilation(target='simt').for_target(get_target('simt'))\n"
        "assert len(k.device.slots) > 1\n"
        "src, plan = SimtRenderer().render_device(k)\n"
        "print(src + plan.to_json())\n"
    )
    outs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 0, out.stderr
        outs.add(out.stdout)
    assert len(outs) == 1


def test_plan_survives_json():
    _, plan = render(sum_exp)
    assert LaunchPlan.from_json(json.loads(plan.to_json())) == plan
    assert LaunchPlan.from_json(plan.to_json()) == plan


def test_host_expressions_follow_the_generated_code():
    n = Var("N", dtype=pt.int64)
    names = {"N": "v_N"}
    e = Binary("floordiv", n, Const(0, dtype=pt.int64), dtype=pt.int64)
    assert eval(py_expr(e, names), {"_fdiv": lambda a, b: a // b if b else 0, "v_N": 7}) == 0
    f = Binary("div", Const(1.0, dtype=pt.float32), Const(0.0, dtype=pt.float32), dtype=pt.float32)
    plan = LaunchPlan((), inputs=(), lets=(("inv", py_expr(f, {})),))
    plan.sizer()([])  # the host never raises on values the device computes without trapping


@pytest.mark.parametrize("kernel", [vector_add, softmax, sum_exp, matmul, column_sum, reverse, two_totals, int_ops])
def test_every_kernel_renders_for_both_thread_mappings(kernel):
    for settings in ({}, {"grid_stride": True}, {"lanes": 16}):
        source, plan = render(kernel, **settings)
        assert source.count("__kernel void") == len(plan.kernels) + sum(k.cached is not None for k in plan.kernels)
        for k in plan.kernels:
            assert f"void {k.name}(" in source
        np.testing.assert_equal(len(plan.sizer()([3] * len(plan.inputs)).extents), len(plan.kernels))


# -- device arrays ---------------------------------------------------------------------------------------------


class FakeDeviceArray:
    """An array in 'device memory': the host binder cannot read it (no NumPy interfaces)."""

    def __init__(self, data: np.ndarray):
        self._data = data
        self.shape, self.dtype = data.shape, data.dtype


def _device_view(value):
    from pypto.targets.simt.args import DeviceArray

    if not isinstance(value, FakeDeviceArray):
        return None
    d = value._data
    return DeviceArray(d, value, d.dtype, d.shape, d.flags.c_contiguous, id(d.base if d.base is not None else d),
                       0, d.nbytes)  # fmt: skip


DEVICE_BACKEND = """
import numpy as np
import pypto
from pypto.backend_api import PLUGIN_API_VERSION, Artifact, Backend, BackendSpec, Source

PYPTO_PLUGIN_API = PLUGIN_API_VERSION


class FakeGPU(Backend):
    spec = BackendSpec("fakegpu", "1.0", PLUGIN_API_VERSION, priority=-5)

    def render(self, program):
        return Source("source")

    def build(self, program, source):
        return Artifact("fakegpu", b"binary", ".bin")

    def load(self, program, artifact):
        from pypto.targets.simt.args import DeviceArray, DeviceBinder

        binder = DeviceBinder(program)

        def run(a, b, c, n):  # loop-IR order: buffers, then dims
            data = lambda x: x.handle if isinstance(x, DeviceArray) else x
            np.add(data(a), data(b), out=data(c))

        def fast_entry(*args):
            bound = binder.bind(args, VIEW)
            if bound is None:
                return NotImplemented
            run(*bound[0])
            return bound[1][0]

        run.fast_entry = fast_entry
        return run


@pypto.hookimpl
def pypto_backends():
    return [FakeGPU()]
"""


def test_device_arrays_reach_the_fast_entry_on_the_first_call(monkeypatch, tmp_path):
    import types

    mod = types.ModuleType("fakegpu_backend")
    mod.VIEW = _device_view
    exec(DEVICE_BACKEND, mod.__dict__)
    monkeypatch.setenv("PYPTO_CACHE_DIR", str(tmp_path))
    try:
        pt.register_plugin(mod, "fakegpu")
        k = pt.kernel(executor="fakegpu")(vector_add.fn)
        a = FakeDeviceArray(np.arange(5, dtype=np.float32))
        c = FakeDeviceArray(np.zeros(5, np.float32))
        assert k(a, a, c) is c  # no NumPy view of a device array: the backend's entry takes it
        np.testing.assert_array_equal(c._data, 2 * np.arange(5))
        with pytest.raises(pt.ShapeError):
            k(a, a, FakeDeviceArray(np.zeros(4, np.float32)))
        with pytest.raises(pt.DTypeError):
            k(a, FakeDeviceArray(np.zeros(5, np.float64)), c)
        with pytest.raises(pt.AliasingError):
            k(a, a, a)
        x, y = np.ones(3, np.float32), np.empty(3, np.float32)
        assert k(x, x, y) is y and (y == 2).all()  # host arrays take the usual path
        with pytest.raises(pt.ArgumentError, match="cannot be used as an input array"):
            k(object(), a, c)  # what neither path can take keeps the binder's error
    finally:
        pt.reload_plugins()


def test_simt_backend_renders_without_its_device_and_remembers_why_it_is_missing():
    from pypto.backend_api import Program
    from pypto.targets.simt.backend import DeviceUnavailable, SimtBackend

    opened = []

    class Missing(SimtBackend):
        name = "missinggpu"

        def open_device(self):
            opened.append(1)
            raise DeviceUnavailable("no such device: plug one in")

        def renderer(self, program: Program):
            return SimtRenderer()

    b = Missing()
    assert b.availability().reason == "no such device: plug one in"
    assert not b.availability().available and opened == [1]  # asked once
    import dataclasses

    program = dataclasses.replace(vector_add.program(), loops=simt_loops(vector_add), target="simt")
    source = b.render(program)
    assert "__kernel void vector_add_k0(" in source.text and "pypto launch plan" not in source.text
    assert source.extras["plan"].kernels[0].name == "vector_add_k0"  # the plan travels as data
    assert "pypto launch plan" in source.display  # and is shown to readers of get_code
    assert b.spec.name == "missinggpu" and b.spec.probe == b.availability


# -- running a plan: the runner shared by the SIMT launchers --------------------------------------------


class _Kernel:
    """A device kernel as the runner sees it: a 1024-thread limit and 64 KiB of local memory."""

    def __init__(self, launch):
        self.launch, self.max_threads = launch, 1024
        self.cached = _Kernel(launch.cached) if launch.cached is not None else None

    def local_sizes(self, threads, counts):
        return tuple(b.itemsize * (threads if b.per_thread else max(c, 1)) for b, c in zip(self.launch.local, counts))

    def fits(self, local):
        return sum(local) <= 64 * 1024


class _Device:
    """Records what the runner asks of a device (allocations are integers, nothing runs)."""

    synchronous = False

    def __init__(self):
        self.log, self.next, self.freed = [], 0, []

    def alloc(self, nbytes):
        self.next += 1
        return (self.next, nbytes)

    def free(self, handle):
        self.freed.append(handle)

    def host_buffer(self, array):
        return None

    def upload(self, handle, array, stream):
        self.log.append(("upload", handle, stream))

    def download(self, array, handle, stream):
        self.log.append(("download", handle, stream))

    def publish(self, array, handle, stream):
        raise AssertionError("host arrays are copied")

    def launch(self, launch, stream):
        self.log.append(("launch", launch.kernel.launch.name, launch.blocks, launch.threads, launch.local, stream))

    def synchronize(self, stream):
        self.log.append(("sync", stream))


def _runner(kernel, policy):
    from pypto.targets.simt.runner import PlanRunner

    _, plan = render(kernel)
    dev = _Device()
    return PlanRunner(kernel.program(), plan, dev, [_Kernel(k) for k in plan.kernels], policy, lambda n, v: v), dev


def test_the_plan_runner_sizes_launches_from_the_policy():
    from pypto.targets.simt.runner import LaunchPolicy

    gpu = LaunchPolicy(map_threads=256, stride_blocks=64, group_min=32, group_max=1024, points_per_thread=4)
    assert gpu.group(16384, 1024) == 1024 and gpu.group(300, 1024) == 128 and gpu.group(7, 1024) == 32
    assert gpu.group(16384, 512) == 512  # the kernel's limit
    cpu = LaunchPolicy(map_threads=1024, group_min=1, group_max=64, long_rows=16384, cache_rows=False)
    assert cpu.group(300, 1024) == 1 and cpu.group(16384, 1024) == 64
    assert gpu.map_block((5, 1000), 1024) == (8, 32) and gpu.map_block((1 << 20,), 128) == (128,)

    run, dev = _runner(sum_exp, gpu)
    x, out = np.ones(100_000, np.float32), np.zeros(1, np.float32)
    launches, copied = run.run([x, out, 100_000], stream=7)
    assert launches is None and copied == [("x", x.nbytes), ("out", 4)]  # host arrays: copied and waited for
    stages = [e for e in dev.log if e[0] == "launch"]
    assert [(e[2], e[3]) for e in stages] == [((7,), (1024,)), ((1,), (32,))]  # 7 blocks of 16384 points, then 7
    assert [e[0] for e in dev.log] == ["upload", "upload", "launch", "launch", "download", "sync"]
    assert all(e[-1] == 7 for e in dev.log)  # everything on the call's stream
    kept, temps = dict(run.copies), {h for h, _ in run.temps.values()}
    run.run([x, out, 100_000], stream=7)
    assert run.copies == kept and not dev.freed  # buffers kept between calls
    run.run([np.ones(200_000, np.float32), out, 200_000], stream=7)
    assert set(dev.freed) == {kept[0][0], *temps}  # x grew, and so did the partials (13 blocks): both replaced


def test_the_plan_runner_takes_cached_rows_where_they_fit():
    from pypto.targets.simt.runner import LaunchPolicy

    run, dev = _runner(softmax, LaunchPolicy(group_max=1024, points_per_thread=4))
    run.run([np.ones((4, 2048), np.float32), np.empty((4, 2048), np.float32), 4, 2048])
    (rows,) = [e for e in dev.log if e[0] == "launch"]
    assert rows[1].endswith("_rows") and rows[2:4] == ((4,), (512,))  # 2048 points, 4 per thread
    assert sorted(rows[4])[-2:] == [2048 * 4, 2048 * 4]  # both rows of 2048 float32 in local memory
    dev.log.clear()
    run.run([np.ones((4, 20_000), np.float32), np.empty((4, 20_000), np.float32), 4, 20_000])
    (plain,) = [e for e in dev.log if e[0] == "launch"]
    assert not plain[1].endswith("_rows")  # 160 KB of rows: more than the device's 64 KiB
