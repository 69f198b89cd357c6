"""oneTBB for the kernels: a runtime library built once, and the small support code in every kernel.

Parsing oneTBB's headers takes a C++ compiler over a second, so kernels do not include them. The
runtime (:data:`RUNTIME`) is the only code compiled against oneTBB: one shared object per toolchain and
oneTBB version, kept in the disk cache beside the kernels (so a cache shipped to a machine without a
compiler still runs) and loaded once per process, never unloaded. It exports a table of functions,
``pt_tbb_runtime`` (a ``struct pt_tbb_api``); the loader hands its address to every kernel it loads (``pt_bind_runtime``) before the
first call. A kernel used without that (its object opened some other way) runs its loops serially.

Each kernel owns one task arena whose concurrency is the thread count (``PYPTO_NUM_THREADS``, else
TBB's default: the CPUs this process may run on). The loader sets it through ``pt_set_num_threads``
when the object is loaded; ``pt_get_num_threads`` reports what the arena really allows. Arenas are
created with ``new`` and never destroyed by static destructors (at interpreter exit they would race
libtbb's own shutdown); the loader calls ``pt_release`` to destroy a kernel's arena just before it
unloads a kernel nothing refers to any more.

``pt_parallel_for`` runs a parallel loop as ``tbb::parallel_for`` over a ``blocked_range`` with the
simple partitioner and a grain size that makes a few contiguous chunks per thread (never smaller
than ``TASK_MIN_WORK``): a thread that is slowed down (another process, another runtime's spinning
threads) has its remaining chunks taken by the others, where a static split would wait for it.
Which thread computes a chunk never changes a result: loops that reduce are never split across
tasks except as fixed blocks with an ordered combine, which the loop IR already provides. The
kernel's loop body reaches the runtime as a function pointer and a context: one indirect call per
chunk.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pypto.targets.cpu.backend import NativeBackend

INCLUDES = ("<stdint.h>", "<stdlib.h>", "<math.h>", "<new>")

# Every task of a parallel loop gets at least this much work (``Loop.work`` units: points times a
# per-point cost), when the loop has that much: a few microseconds, well above a task's overhead.
TASK_MIN_WORK = 1 << 15
# Chunks per thread of a parallel loop: enough for idle threads to take over a slowed thread's share.
CHUNKS_PER_THREAD = 4

# the runtime's function table, as both the runtime and every kernel declare it
API = """\
struct pt_tbb_api {
    void *(*arena_new)(int threads);  /* a task arena of `threads` (0: TBB's default); NULL if out of memory */
    void (*arena_delete)(void *arena);
    int (*arena_concurrency)(void *arena);
    /* body(context, begin, end) over chunks of `size` iterations of [lo, hi), in the arena */
    void (*parallel_for)(void *arena, int64_t lo, int64_t hi, int64_t size,
                         void (*body)(const void *, int64_t, int64_t), const void *context);
};"""

RUNTIME = (
    """\
/* pypto's oneTBB runtime for TBB kernels (pypto_tbb.runtime): generated code, do not edit */
#include <stdint.h>
#include <mutex>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

"""
    + API
    + """

namespace {

/* the process's worker limit, raised when a kernel asks for more threads than TBB starts by default;
   never destroyed (at exit it would race libtbb's shutdown), as this library is never unloaded */
std::mutex pt_limit_mutex;
tbb::global_control *pt_thread_limit = nullptr;
size_t pt_thread_limit_n = 0;

void *pt_arena_new(int n) {
    try {
        const int available = tbb::info::default_concurrency();
        if (n <= 0) n = available;
        if (n > available) {
            std::lock_guard<std::mutex> lock(pt_limit_mutex);
            if ((size_t)n > pt_thread_limit_n) {
                tbb::global_control *previous = pt_thread_limit;
                pt_thread_limit = new tbb::global_control(tbb::global_control::max_allowed_parallelism, (size_t)n);
                pt_thread_limit_n = (size_t)n;
                delete previous;
            }
        }
        tbb::task_arena *arena = new tbb::task_arena(n);
        arena->initialize();
        return arena;
    } catch (...) {  /* nothing may cross into the C caller */
        return nullptr;
    }
}

void pt_arena_delete(void *arena) { delete static_cast<tbb::task_arena *>(arena); }

int pt_arena_concurrency(void *arena) { return static_cast<tbb::task_arena *>(arena)->max_concurrency(); }

/* an exception of a task (an allocation failure) reaches the kernel's caller, which catches it */
void pt_parallel_for(void *arena, int64_t lo, int64_t hi, int64_t size,
                     void (*body)(const void *, int64_t, int64_t), const void *context) {
    static_cast<tbb::task_arena *>(arena)->execute([&] {
        tbb::parallel_for(
            tbb::blocked_range<int64_t>(lo, hi, (size_t)size),
            [&](const tbb::blocked_range<int64_t> &r) { body(context, r.begin(), r.end()); },
            tbb::simple_partitioner());
    });
}

}  // namespace

extern "C" const pt_tbb_api pt_tbb_runtime = {pt_arena_new, pt_arena_delete, pt_arena_concurrency, pt_parallel_for};
"""
)

SUPPORT = (
    """\
/* oneTBB through pypto's runtime library (see pypto_tbb.runtime): this kernel includes no TBB header */
"""
    + API
    + """
static const pt_tbb_api *pt_tbb = nullptr;
static void *pt_arena_ptr = nullptr; /* this kernel's task arena; its concurrency is the thread count */

/* called by the loader (with the GIL held) when the object is loaded, before anything else */
extern "C" void pt_bind_runtime(const pt_tbb_api *api) { pt_tbb = api; }

/* called by the loader (with the GIL held) before the first call; 0 means TBB's default */
extern "C" void pt_set_num_threads(int n) {
    if (pt_tbb != nullptr)  /* the old arena stays alive: a call may still be running in it */
        __atomic_store_n(&pt_arena_ptr, pt_tbb->arena_new(n), __ATOMIC_RELEASE);
}

static void *pt_arena() {
    void *arena = __atomic_load_n(&pt_arena_ptr, __ATOMIC_ACQUIRE);
    if (arena == nullptr) {
        void *fresh = pt_tbb->arena_new(0);
        if (fresh == nullptr) throw std::bad_alloc();
        if (__atomic_compare_exchange_n(&pt_arena_ptr, &arena, fresh, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            arena = fresh;
        else
            pt_tbb->arena_delete(fresh);
    }
    return arena;
}

extern "C" int pt_get_num_threads(void) {
    if (pt_tbb == nullptr) return 1;
    try {
        return pt_tbb->arena_concurrency(pt_arena());
    } catch (...) {
        return 0;
    }
}

/* called by the loader (with the GIL held) just before this object is unloaded, when no call of it can be
   running; never at interpreter exit */
extern "C" void pt_release(void) {
    void *arena = __atomic_exchange_n(&pt_arena_ptr, (void *)nullptr, __ATOMIC_ACQ_REL);
    if (arena != nullptr) pt_tbb->arena_delete(arena);
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
    if (pt_tbb == nullptr) {  /* not loaded by pypto: no runtime, one thread */
        body(lo, hi);
        return;
    }
    void *arena = pt_arena();
    const int64_t chunks = (int64_t)pt_tbb->arena_concurrency(arena) * PT_CHUNKS_PER_THREAD;
    const int64_t even = (hi - lo + chunks - 1) / chunks;
    pt_tbb->parallel_for(arena, lo, hi, even > grain ? even : grain,
                         [](const void *b, int64_t begin, int64_t end) { (*static_cast<const Body *>(b))(begin, end); },
                         &body);
}"""
)


def support_source(task_min_work: int = TASK_MIN_WORK, chunks_per_thread: int = CHUNKS_PER_THREAD) -> list[str]:
    """The support code's lines, with the minimum work per task and the chunks per thread filled in."""
    return [
        f"#define PT_TASK_MIN_WORK {int(task_min_work)}LL",
        f"#define PT_CHUNKS_PER_THREAD {int(chunks_per_thread)}LL",
        *SUPPORT.splitlines(),
    ]


# -- the runtime library: built (or found in the cache) and loaded once per process ---------------------
RUNTIME_CACHE = "runtime/tbb"  # under the cache root, beside (not among) the kernels
_lock = threading.Lock()
_api: int | None = None
_handle: int | None = None


def runtime_api(backend: NativeBackend, tbb_version: str) -> int:
    """The address of the runtime's function table (``pt_tbb_runtime``), loading (building, the first time) the runtime."""
    global _api
    if _api is None:
        with _lock:
            if _api is None:
                _api = _load(backend, tbb_version)
    return _api


def runtime_key(identity: str, tbb_version: str) -> str:
    """The runtime's cache key: its source, the toolchain and oneTBB's version."""
    from pypto._hashing import sha256
    from pypto._version import __version__

    h = sha256()
    for part in ("pypto-tbb-runtime", __version__, identity, f"tbb={tbb_version}", RUNTIME):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _load(backend: NativeBackend, tbb_version: str) -> int:
    import _ctypes
    import os

    from pypto.backend_api import Artifact
    from pypto.cache import DiskCache, cache_enabled
    from pypto.targets.cpu.loader import artifact_path
    from pypto.targets.cpu.toolchain import ToolchainError, build_shared

    global _handle
    tc = backend.toolchain()
    key = runtime_key(tc.identity(), tbb_version)
    cache = DiskCache() if cache_enabled() else None
    artifact = cache.get(RUNTIME_CACHE, key) if cache is not None else None
    if artifact is None:
        if tc.prebuilt:
            raise ToolchainError(
                f"{tc.prebuilt}\n  pypto's TBB runtime library is not in the cache, and building it needs a "
                "compiler (copy the whole cache directory, runtime/ included, from the machine that built the kernels)"
            )
        artifact = Artifact(backend.name, build_shared(tc, RUNTIME, name="pt_tbb_runtime"), ".so", {})
        if cache is not None:
            artifact = cache.put(RUNTIME_CACHE, key, artifact)
    path, temporary = artifact_path(artifact)
    try:  # never unloaded: kernels of any age may hold its address
        _handle = _ctypes.dlopen(path, os.RTLD_NOW | os.RTLD_LOCAL | os.RTLD_NODELETE)
        return _ctypes.dlsym(_handle, "pt_tbb_runtime")
    finally:
        if temporary:
            os.unlink(path)
