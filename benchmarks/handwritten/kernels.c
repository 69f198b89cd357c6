/* Hand-written C/OpenMP reference kernels for the benchmarks: the best versions we know how to write
 * for this kind of machine (per-row passes over cache-resident rows, vector math from libmvec,
 * non-temporal stores for outputs far larger than the caches). Compiled with the same compiler and
 * flags as pypto's OpenMP backend. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <omp.h>

#pragma omp declare simd notinbranch
float expf(float);
#pragma omp declare simd notinbranch
float tanhf(float);

void vector_add(const float *restrict a, const float *restrict b, float *restrict c, int64_t n) {
    #pragma omp parallel for simd schedule(static) if(n >= 65536)
    for (int64_t i = 0; i < n; i++) c[i] = a[i] + b[i];
}

/* streaming stores: c is written without being read into the cache first */
void vector_add_nt(const float *restrict a, const float *restrict b, float *restrict c, int64_t n) {
    #pragma omp parallel
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t chunk = (n / nt + 15) & ~(int64_t)15;
        int64_t lo = t * chunk, hi = lo + chunk < n ? lo + chunk : n;
        int64_t i = lo;
        for (; i < hi && ((uintptr_t)(c + i) & 31); i++) c[i] = a[i] + b[i];
        for (; i + 8 <= hi; i += 8)
            _mm256_stream_ps(c + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
        for (; i < hi; i++) c[i] = a[i] + b[i];
    }
    _mm_sfence();
}

void softmax(const float *restrict x, float *restrict y, int64_t m, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float mx = -INFINITY;
        #pragma omp simd reduction(max:mx)
        for (int64_t j = 0; j < n; j++) mx = xr[j] > mx ? xr[j] : mx;
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (int64_t j = 0; j < n; j++) { float e = expf(xr[j] - mx); yr[j] = e; s += e; }
        float inv = 1.0f / s;
        #pragma omp simd
        for (int64_t j = 0; j < n; j++) yr[j] *= inv;
    }
}

float sum_exp(const float *restrict x, int64_t n) {
    float s = 0.0f;
    #pragma omp parallel for simd schedule(static) reduction(+:s)
    for (int64_t i = 0; i < n; i++) s += expf(x[i]);
    return s;
}

void layernorm(const float *restrict x, const float *restrict g, const float *restrict b, float *restrict y,
               int64_t m, int64_t n, float eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (int64_t j = 0; j < n; j++) s += xr[j];
        float mean = s / (float)n;
        float v = 0.0f;
        #pragma omp simd reduction(+:v)
        for (int64_t j = 0; j < n; j++) { float d = xr[j] - mean; v += d * d; }
        float rstd = 1.0f / sqrtf(v / (float)n + eps);
        #pragma omp simd
        for (int64_t j = 0; j < n; j++) yr[j] = (xr[j] - mean) * rstd * g[j] + b[j];
    }
}

void gelu(const float *restrict x, float *restrict y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}

/* STREAM-style bandwidth probes */
void stream_triad(const float *restrict a, const float *restrict b, float *restrict c, float s, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) c[i] = a[i] + s * b[i];
}

float stream_read(const float *restrict a, int64_t n) {
    float s = 0.0f;
    #pragma omp parallel for simd schedule(static) reduction(+:s)
    for (int64_t i = 0; i < n; i++) s += a[i];
    return s;
}

/* The machine's peak float32 multiply-add rate: independent vector FMA chains (no memory traffic).
   Returns the floating-point operations done (2 per lane per FMA), for the caller to time. */
double fma_peak(int64_t iters) {
    double total = 0.0;
    #pragma omp parallel reduction(+:total)
    {
        float acc[12][16];
        for (int c = 0; c < 12; c++)
            for (int l = 0; l < 16; l++) acc[c][l] = 1.0f + 1e-7f * (float)(c * 16 + l);
        const float m = 0.999999f, a = 1e-7f;
        for (int64_t it = 0; it < iters; it++)
            for (int c = 0; c < 12; c++) {
                #pragma omp simd
                for (int l = 0; l < 16; l++) acc[c][l] = acc[c][l] * m + a;
            }
        float s = 0.0f;
        for (int c = 0; c < 12; c++)
            for (int l = 0; l < 16; l++) s += acc[c][l];
        total += 2.0 * 12 * 16 * (double)iters + (s == 12345.0f);  /* s keeps the chains alive */
    }
    return total;
}
