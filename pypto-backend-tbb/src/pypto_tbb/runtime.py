"""The C++ support code compiled into every TBB kernel: its task arena, the thread count, parallel loops.

Each kernel's shared object owns one ``tbb::task_arena`` whose concurrency is the thread count
(``PYPTO_NUM_THREADS``, else TBB's default: the CPUs this process may run on). The core's loader
sets it through ``pt_set_num_threads`` when the object is loaded; ``pt_get_num_threads`` reports
what the arena really allows. Arenas and limits are created with ``new`` and never destroyed by static
destructors (at interpreter exit they would race libtbb's own shutdown); the loader calls
``pt_release`` to destroy them just before it unloads a kernel nothing refers to any more.

``pt_parallel_for`` runs a parallel loop as ``tbb::parallel_for`` over a ``blocked_range`` with the
simple partitioner and a grain size that makes a few contiguous chunks per thread (never smaller
than ``TASK_MIN_WORK``): a thread that is slowed down (another process, another runtime's spinning
threads) has its remaining chunks taken by the others, where a static split would wait for it.
Which thread computes a chunk never changes a result: loops that reduce are never split across
tasks except as fixed blocks with an ordered combine, which the loop IR already provides.
"""

from __future__ import annotations

INCLUDES = (
    "<stdint.h>",
    "<stdlib.h>",
    "<math.h>",
    "<atomic>",
    "<oneapi/tbb/blocked_range.h>",
    "<oneapi/tbb/global_control.h>",
    "<oneapi/tbb/info.h>",
    "<oneapi/tbb/parallel_for.h>",
    "<oneapi/tbb/partitioner.h>",
    "<oneapi/tbb/task_arena.h>",
)

# Every task of a parallel loop gets at least this much work (``Loop.work`` units: points times a
# per-point cost), when the loop has that much: a few microseconds, well above a task's overhead.
TASK_MIN_WORK = 1 << 15
# Chunks per thread of a parallel loop: enough for idle threads to take over a slowed thread's share.
CHUNKS_PER_THREAD = 4

SUPPORT = """\
/* parallel loops run in this kernel's task arena; its concurrency is the thread count */
static std::atomic<tbb::task_arena *> pt_arena_ptr{nullptr};
static tbb::global_control *pt_thread_limit = nullptr;

static tbb::task_arena *pt_make_arena(int n) {
    const int available = tbb::info::default_concurrency();
    if (n <= 0) n = available;
    if (n > available) {
        /* more threads than TBB starts by default: raise the process's worker limit */
        tbb::global_control *previous = pt_thread_limit;
        pt_thread_limit = new tbb::global_control(tbb::global_control::max_allowed_parallelism, (size_t)n);
        delete previous;
    }
    tbb::task_arena *arena = new tbb::task_arena(n);
    arena->initialize();
    return arena;
}

/* called by the loader (with the GIL held) before the first call; 0 means TBB's default */
extern "C" void pt_set_num_threads(int n) {
    pt_arena_ptr.store(pt_make_arena(n), std::memory_order_release);  /* the old arena stays alive */
}

static tbb::task_arena &pt_arena() {
    tbb::task_arena *arena = pt_arena_ptr.load(std::memory_order_acquire);
    if (arena == nullptr) {
        tbb::task_arena *fresh = pt_make_arena(0);
        if (pt_arena_ptr.compare_exchange_strong(arena, fresh, std::memory_order_acq_rel)) arena = fresh;
        else delete fresh;
    }
    return *arena;
}

extern "C" int pt_get_num_threads(void) { return pt_arena().max_concurrency(); }

/* called by the loader (with the GIL held) just before this object is unloaded, when no call of it can be
   running; never at interpreter exit */
extern "C" void pt_release(void) {
    delete pt_arena_ptr.exchange(nullptr, std::memory_order_acq_rel);
    delete pt_thread_limit;
    pt_thread_limit = nullptr;
}

/* iterations per task so that every task gets at least PT_TASK_MIN_WORK of the loop's work */
static inline int64_t pt_grain(int64_t work, int64_t iterations) {
    const int64_t per = iterations > 0 && work / iterations > 0 ? work / iterations : 1;
    return PT_TASK_MIN_WORK / per > 1 ? PT_TASK_MIN_WORK / per : 1;
}

/* body(begin, end) over chunks of [lo, hi): a few per thread, each of at least `grain` iterations;
   idle threads take the next chunk, so a thread that is descheduled or slowed does not hold up the rest */
template <typename Body>
static void pt_parallel_for(int64_t lo, int64_t hi, int64_t grain, const Body &body) {
    tbb::task_arena &arena = pt_arena();
    const int64_t chunks = (int64_t)arena.max_concurrency() * PT_CHUNKS_PER_THREAD;
    const int64_t even = (hi - lo + chunks - 1) / chunks;
    const size_t size = (size_t)(even > grain ? even : grain);
    arena.execute([&] {
        tbb::parallel_for(
            tbb::blocked_range<int64_t>(lo, hi, size),
            [&](const tbb::blocked_range<int64_t> &r) { body(r.begin(), r.end()); },
            tbb::simple_partitioner());
    });
}"""


def support_source(task_min_work: int = TASK_MIN_WORK, chunks_per_thread: int = CHUNKS_PER_THREAD) -> list[str]:
    """The support code's lines, with the minimum work per task and the chunks per thread filled in."""
    return [
        f"#define PT_TASK_MIN_WORK {int(task_min_work)}LL",
        f"#define PT_CHUNKS_PER_THREAD {int(chunks_per_thread)}LL",
        *SUPPORT.splitlines(),
    ]
