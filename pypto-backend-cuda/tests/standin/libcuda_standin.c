/* A stand-in for the CUDA driver library, for tests on machines without a GPU: the entry points the
 * backend declares, with their C signatures, over host memory. Device memory is malloc'ed; a launch
 * runs nothing but records its sizes and its first argument slots (read back by the test through
 * standin_last_launch); modules and functions are names. It checks that the backend's cffi declarations,
 * argument slots and call sequence work against a real shared library. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

static int initialised = 0;
static CUcontext current = 0;
static CUcontext primary = (CUcontext)0x1000;
static long long launches = 0;
static unsigned int last_sizes[8];
static unsigned long long last_args[8];
static int last_nargs = 0;
static char last_name[128];
static CUresult fail_next = 0;

CUresult cuInit(unsigned int flags) { (void)flags; initialised = 1; return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuGetErrorName(CUresult e, const char **s) { *s = e == 1 ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_STANDIN"; return 0; }
CUresult cuGetErrorString(CUresult e, const char **s) { (void)e; *s = "stand-in error"; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = initialised ? 1 : 0; return initialised ? 0 : 3; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { *d = ordinal; return ordinal == 0 ? 0 : 101; }
CUresult cuDeviceGetName(char *name, int len, CUdevice d) { (void)d; strncpy(name, "Stand-in GPU", len); return 0; }
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    (void)d;
    switch (attr) {
    case 1: *v = 1024; break;            /* max threads per block */
    case 8: *v = 48 * 1024; break;       /* shared memory per block */
    case 16: *v = 132; break;            /* multiprocessors */
    case 38: *v = 50 << 20; break;       /* L2 */
    case 39: *v = 2048; break;
    case 75: *v = 9; break;              /* compute capability */
    case 76: *v = 0; break;
    case 97: *v = 227 * 1024; break;     /* opt-in shared memory */
    default: *v = 0;
    }
    return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) { (void)d; *bytes = (size_t)1 << 34; return 0; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { (void)d; *c = primary; return 0; }
CUresult cuCtxGetCurrent(CUcontext *c) { *c = current; return 0; }
CUresult cuCtxPushCurrent_v2(CUcontext c) { current = c; return 0; }
CUresult cuCtxPopCurrent_v2(CUcontext *c) { *c = current; current = 0; return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = *t = (size_t)1 << 34; return 0; }
CUresult cuModuleLoadData(CUmodule *m, const void *image) { *m = (CUmodule)strdup((const char *)image); return 0; }
CUresult cuModuleUnload(CUmodule m) { free(m); return 0; }
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) { (void)m; *f = (CUfunction)strdup(name); return 0; }
CUresult cuFuncGetAttribute(int *v, int attr, CUfunction f) { (void)f; *v = attr == 0 ? 1024 : attr == 4 ? 32 : 0; return 0; }
CUresult cuFuncSetAttribute(CUfunction f, int attr, int value) { (void)f; (void)attr; return value > 227 * 1024 ? 1 : 0; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { *p = (CUdeviceptr)(uintptr_t)malloc(n); return *p ? 0 : 2; }
CUresult cuMemFree_v2(CUdeviceptr p) { free((void *)(uintptr_t)p); return 0; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st) { (void)st; memcpy((void *)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st) { (void)st; memcpy(d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char c, size_t n, CUstream st) { (void)st; memset((void *)(uintptr_t)d, c, n); return 0; }
CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) { (void)p; if (attr != 9) return 1; *(int *)data = 0; return 0; }
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
                        unsigned int bz, unsigned int shared, CUstream s, void **params, void **extra) {
    (void)s; (void)extra;
    if (fail_next) { CUresult rc = fail_next; fail_next = 0; return rc; }
    if (current != primary) return 201; /* CUDA_ERROR_INVALID_CONTEXT: no context current */
    if (bx * by * bz > 1024 || bx * by * bz == 0) return 1;
    unsigned int sizes[8] = {gx, gy, gz, bx, by, bz, shared, 0};
    memcpy(last_sizes, sizes, sizeof sizes);
    strncpy(last_name, (const char *)f, sizeof last_name - 1);
    /* every slot is at least 4 bytes; read 8 where the test says so (pointers, dims) */
    last_nargs = 0;
    for (int i = 0; i < 8 && params && params[i]; i++) {
        last_args[i] = *(unsigned long long *)params[i];
        last_nargs = i + 1;
    }
    launches++;
    return 0;
}
CUresult cuStreamCreate(CUstream *s, unsigned int flags) { (void)flags; *s = (CUstream)malloc(1); return 0; }
CUresult cuStreamDestroy_v2(CUstream s) { free(s); return 0; }
CUresult cuStreamSynchronize(CUstream s) { (void)s; return 0; }
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) { (void)s; (void)e; (void)flags; return 0; }
CUresult cuEventCreate(CUevent *e, unsigned int flags) { (void)flags; *e = (CUevent)malloc(1); return 0; }
CUresult cuEventDestroy_v2(CUevent e) { free(e); return 0; }
CUresult cuEventRecord(CUevent e, CUstream s) { (void)e; (void)s; return 0; }
CUresult cuEventSynchronize(CUevent e) { (void)e; return 0; }
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) { (void)a; (void)b; *ms = 0.5f; return 0; }

/* for the test */
void standin_fail_next_launch(CUresult code) { fail_next = code; }
long long standin_launches(void) { return launches; }
const char *standin_last_name(void) { return last_name; }
unsigned int standin_last_size(int i) { return last_sizes[i]; }
unsigned long long standin_last_arg(int i) { return last_args[i]; }
