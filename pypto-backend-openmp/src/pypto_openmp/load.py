"""Threads under load: a parallel region runs on fewer threads while other processes hold the cores.

An OpenMP region ends when every thread of its team has done its share. On a machine whose cores other
processes keep busy, a thread of the team often waits a scheduler slice (milliseconds) for its core while the
others wait for it: a small kernel that takes 0.05 ms on two idle cores then averages 0.46 ms per call, 4x
its time on one thread (``benchmarks/threads_under_load.py``; RESULTS.md). OpenMP's wait policies do not
help: a passive wait doubles the time of small calls on an idle machine, a short spin is worse under load.

So every region measures what it can see for free: each thread notes when it started (its *lag* after the
region began) and how long it worked. A region is *late* when its latest thread started more than
:data:`LATE_NS` after the region began and later than the region's work would have taken the others
without it (``lag > busy * (team - 1) / team``, ``busy`` the team's total work): one thread alone would
have finished sooner. Then the next regions run on half the team for :data:`QUIET_NS`, after which one
region tries the larger team again (a *probe*); a probe that is late again doubles the quiet time (up to
:data:`QUIET_MAX_NS`), one on time restores the team. On an idle machine no region is late (a sleeping
thread wakes in tens of microseconds), so nothing changes; a long region whose thread is preempted midway
is not late either (its lag is small), and keeps every thread.

The state is one per process, shared by every loaded kernel (:data:`STATE`, whose address each kernel
receives when loaded, ``pt_bind_load``): what one kernel learned about the machine applies to the next.
The first region of a larger team than any before is never late: OpenMP starts its threads then.
``PYPTO_ADAPT_THREADS=0`` turns the rule off (every region takes the whole team), e.g. for measurements of
the threads themselves. ``pt.get_runtime_info()["backends"]["openmp"]["load"]`` reports the late regions
seen and the current team limit.
"""

from __future__ import annotations

import ctypes
from typing import Any

LATE_NS = 200_000
"""A thread that starts at most this late (ns) never makes a region late: waking a sleeping thread takes
10-60 us on an idle machine, being descheduled behind another process a scheduler slice (1-4 ms)."""
QUIET_NS = 20_000_000
"""How long (ns) regions keep the smaller team after a late one, before a probe."""
QUIET_MAX_NS = 1_000_000_000
"""The longest quiet time (ns), reached after several late probes in a row."""
NO_CAP = 0x7FFFFFFF


class LoadState(ctypes.Structure):
    """``pt_load_t``: the process's state, read and written by the kernels with relaxed atomics."""

    _fields_ = [
        ("until", ctypes.c_int64),  # CLOCK_MONOTONIC ns until which regions keep `cap` threads
        ("period", ctypes.c_int64),  # the quiet time after the next late probe
        ("cap", ctypes.c_int32),  # the team limit (NO_CAP: none)
        ("enabled", ctypes.c_int32),
        ("late", ctypes.c_int64),  # late regions seen by this process
        ("started", ctypes.c_int32),  # the largest team a region has had: a larger one starts new threads
        ("spare", ctypes.c_int32),
    ]


def _new_state() -> LoadState:
    from pypto import _env

    return LoadState(0, QUIET_NS, NO_CAP, int(_env.adapt_threads()), 0, 1, 0)


STATE: LoadState | None = None


def state() -> LoadState:
    """The process's state, made (reading ``PYPTO_ADAPT_THREADS``) when the first kernel is loaded."""
    global STATE
    if STATE is None:
        STATE = _new_state()
    return STATE


def bind(library: Any) -> None:
    """Give a freshly loaded kernel the process's state (``pt_bind_load``); kernels built before the rule
    existed export no such function and keep running as they were built."""
    if library.symbol("pt_bind_load") is not None:
        library.call("pt_bind_load", ctypes.c_void_p(ctypes.addressof(state())))


def report() -> dict[str, Any]:
    """What ``pt.get_runtime_info()`` shows: whether the rule is on, the late regions so far, the team limit."""
    s = state()
    return {
        "adapt_threads": bool(s.enabled),
        "late_regions": int(s.late),
        "team_limit": None if s.cap == NO_CAP else int(s.cap),
    }


def load_declarations() -> list[str]:
    """The C every OpenMP kernel carries: the shared state, ``pt_team`` and the region's reports."""
    return f"""\
/* threads under load (pypto_openmp.load): a region whose threads start late runs on fewer for a while */
typedef struct {{ int64_t until, period; int32_t cap, enabled; int64_t late; int32_t started, spare; }} pt_load_t;
static pt_load_t pt_load_own = {{0, {QUIET_NS}LL, {NO_CAP}, 1, 0, 1, 0}};
static pt_load_t *pt_load = &pt_load_own;
void pt_bind_load(void *state) {{ pt_load = state != NULL ? (pt_load_t *)state : &pt_load_own; }}
static inline int64_t pt_clock(void) {{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}}
/* the team of the next region: the thread count, or fewer while other processes hold the cores */
static int pt_team(void) {{
    const int n = PT_THREADS, cap = __atomic_load_n(&pt_load->cap, __ATOMIC_RELAXED);
    if (cap >= n) return n;
    if (pt_clock() < __atomic_load_n(&pt_load->until, __ATOMIC_RELAXED)) return cap;
    return 2 * cap < n ? 2 * cap : n; /* the quiet time is over: a probe */
}}
/* each thread of a region, when done: its lag after the region began (the team's latest), its work */
static inline void pt_region_mark(int64_t r0, int64_t s, int64_t *lag, int64_t *busy) {{
    const int64_t now = pt_clock(), l = s - r0;
    __atomic_add_fetch(busy, now - s, __ATOMIC_RELAXED);
    int64_t seen = __atomic_load_n(lag, __ATOMIC_RELAXED);
    while (l > seen && !__atomic_compare_exchange_n(lag, &seen, l, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {{}}
}}
/* after a region of `team` threads: late (one thread alone would have been sooner) halves the next teams */
void pt_region_done(int team, int64_t lag, int64_t busy) {{
    pt_load_t *L = pt_load;
    if (team < 2 || !__atomic_load_n(&L->enabled, __ATOMIC_RELAXED)) return;
    if (team > __atomic_load_n(&L->started, __ATOMIC_RELAXED)) {{ /* its threads were being started: not late */
        __atomic_store_n(&L->started, team, __ATOMIC_RELAXED);
        return;
    }}
    const int cap = __atomic_load_n(&L->cap, __ATOMIC_RELAXED);
    if (lag > {LATE_NS}LL && lag * team > busy * (team - 1)) {{
        const int64_t period = __atomic_load_n(&L->period, __ATOMIC_RELAXED);
        __atomic_store_n(&L->cap, team / 2, __ATOMIC_RELAXED);
        __atomic_store_n(&L->until, pt_clock() + period, __ATOMIC_RELAXED);
        if (team > cap) /* a probe, late again: a longer quiet time next */
            __atomic_store_n(&L->period, 2 * period < {QUIET_MAX_NS}LL ? 2 * period : {QUIET_MAX_NS}LL, __ATOMIC_RELAXED);
        __atomic_add_fetch(&L->late, 1, __ATOMIC_RELAXED);
    }} else if (team > cap) {{ /* a probe on time: the cores are free again */
        __atomic_store_n(&L->cap, team, __ATOMIC_RELAXED);
        __atomic_store_n(&L->period, {QUIET_NS}LL, __ATOMIC_RELAXED);
    }}
}}""".splitlines()


__all__ = ["LATE_NS", "QUIET_NS", "QUIET_MAX_NS", "LoadState", "state", "bind", "report", "load_declarations"]
