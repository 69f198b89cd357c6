"""The C++ the TBB backend generates: parallel_for over blocked ranges, SIMD inner loops, C linkage."""

from __future__ import annotations

import re

from pypto.plugins import get_registry
from pypto.testing import softmax, sum_exp, vector_add
from pypto_tbb.runtime import RUNTIME


def kernel_text(code: str) -> str:
    """The kernel function alone (no support code, no fast entry)."""
    start = code.index('extern "C" int ', code.index("pt_parallel_for(int64_t lo"))
    return code[start : code.index("/* fast-call")]


def test_parallel_loops_are_tbb_parallel_for_over_blocked_ranges():
    code = softmax.get_code()
    # the kernel includes no TBB header: its loops go through the runtime library's table
    assert "tbb" not in "".join(line for line in code.splitlines() if line.startswith("#include"))
    assert "pt_tbb->parallel_for(arena, lo, hi, even > grain ? even : grain," in code
    assert "pt_tbb->arena_concurrency(arena) * PT_CHUNKS_PER_THREAD" in code  # a few chunks per thread
    assert "parallel_reduce" not in code and "#pragma omp parallel" not in code
    assert "#include <oneapi/tbb/parallel_for.h>" in RUNTIME and "tbb::simple_partitioner()" in RUNTIME
    assert "tbb::blocked_range<int64_t>(lo, hi, (size_t)size)" in RUNTIME
    body = kernel_text(code)
    # the row loop is a lambda over a chunk of rows, capturing by reference, buffers passed by value
    assert re.search(r"auto pt_chunk\d+ = \[&\]\(int64_t pt_begin\d+, int64_t pt_end\d+, "
                     r"const float \*__restrict__ x, float \*__restrict__ y, const int64_t N", body)  # fmt: skip
    assert "pt_parallel_for(pt_lo" in body


def test_no_tasks_for_tiny_problems():
    body = kernel_text(softmax.get_code())
    assert re.search(r"if \(16 \* M \* N >= 524288 && pt_hi\d+ - pt_lo\d+ > 1\)", body)
    assert re.search(r"else\n\s+pt_chunk\d+\(pt_lo\d+, pt_hi\d+, x, y, N\);", body)


def test_softmax_inner_loops_are_simd_without_temporaries():
    code = softmax.get_code()
    body = kernel_text(code)
    # rows that fit in cache: max, sum (writing exp once), scale: three SIMD passes over a cached row
    short_rows = body.split("} else {", 1)[1]
    assert short_rows.count("#pragma omp simd") == 3
    assert "reduction(max:" in body and "reduction(+:" in body
    assert "malloc" not in body  # no temporaries
    # float32 exp is pypto's own (pypto.targets.cpu.vmath), inlined into the SIMD loops
    assert "#pragma omp declare simd notinbranch\nstatic inline float pt_expf(float x) {" in code
    assert "pt_expf(" in body and "expf(float);" not in code


def test_cxx_spellings_and_c_linkage():
    code = softmax.get_code()
    assert 'extern "C" int softmax(const float *__restrict__ x, float *__restrict__ y, int64_t M, int64_t N) {' in code
    assert 'extern "C" void pt_set_num_threads(int n)' in code
    assert "<stdbool.h>" not in code and "restrict " not in code.replace("__restrict__ ", "")
    assert 'extern "C" void pt_release(void)' in code  # the loader frees the task arena before unloading
    assert 'extern "C" void pt_bind_runtime(const pt_tbb_api *api)' in code  # the loader binds the runtime
    # the fast entry is compiled into the same C++ object, its constructor with C linkage
    assert (
        '#ifdef __cplusplus\nextern "C"\n#endif\n__attribute__((visibility("default"))) PyObject *pt_entry_new(PyObject *owner)'
        in code
    )


def test_sum_exp_is_split_in_fixed_blocks_with_an_ordered_combine():
    body = kernel_text(sum_exp.get_code())
    assert "_partial" in body and "16384" in body
    assert body.count("pt_parallel_for(") == 1
    # the partials are combined serially, in block order, after the parallel loop
    combine = body.split("pt_parallel_for(", 1)[1]
    assert re.search(
        r"for \(int64_t _b\d+ = 0; _b\d+ < _nblocks\d+; _b\d+\+\+\) \{\n\s+sum_\d+ = sum_\d+ \+ _partial", combine
    )


def test_large_1d_outputs_are_streamed_per_block_inside_tasks():
    body = kernel_text(vector_add.get_code())
    assert "((N - 0) * (int64_t)sizeof(*c)) >= 16777216LL && ((uintptr_t)c & 63) == 0" in body
    streamed, plain = body.split("} else {", 1)
    assert "pt_stream_bytes(c + pt_blk, pt_buf_c" in streamed and "pt_stream_fence();" in streamed
    assert "pt_parallel_for(0, (pt_hi" in streamed
    assert "pt_stream" not in plain and "pt_parallel_for(pt_lo" in plain


def test_aliasing_variant_has_no_restrict():
    program = vector_add.program(noalias=False, backend="tbb")
    code = get_registry().backend("tbb").render(program).text
    assert 'extern "C" int vector_add(const float *a, const float *b, float *c, int64_t N)' in code
    assert "__restrict__" not in code.split('extern "C" int vector_add(')[1]
    assert "(int64_t pt_begin2, int64_t pt_end2, const float *a, const float *b, float *c)" in code
    assert "pt_entry_new" not in code  # only the no-alias variant gets the fast entry


def test_get_code_names_the_tbb_backend_explicitly(monkeypatch):
    monkeypatch.setenv("PYPTO_EXECUTOR", "openmp")
    assert "pt_tbb->parallel_for(" in softmax.get_code(backend="tbb")
