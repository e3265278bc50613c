/* Layer: arithmetic. The loops of mpcnet/gf64.py, compiled: GF(2^64) products and the bit-level
 * sums of the AND proof (mpcnet/schemes/dzkp.py).
 *
 * GF(2^64) = GF(2)[x] / (x^64 + x^4 + x^3 + x + 1); an element is a uint64 word, bit d the
 * coefficient of x^d; addition is XOR. A product is a carry-less multiply (the CPU's PCLMULQDQ
 * where it has one, else a loop, inlined into each kernel: _gf64_kernels.h) and one reduction; sums of products are accumulated unreduced
 * (128 bits) and reduced once. Arrays are passed through the buffer protocol as C-contiguous
 * uint64 buffers; the Python wrapper (mpcnet.gf64) checks shapes and allocates outputs.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef unsigned __int128 u128;

static u128 clmul_loop(uint64_t a, uint64_t b) {
    u128 r = 0, wide = a;
    while (b) {
        if (b & 1) r ^= wide;
        wide <<= 1;
        b >>= 1;
    }
    return r;
}

#if defined(__x86_64__)
#include <smmintrin.h>
#include <wmmintrin.h>
__attribute__((target("pclmul,sse4.1"))) static inline u128 clmul_hw(uint64_t a, uint64_t b) {
    __m128i p = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)a),
                                     _mm_cvtsi64_si128((long long)b), 0);
    uint64_t lo = (uint64_t)_mm_cvtsi128_si64(p), hi = (uint64_t)_mm_extract_epi64(p, 1);
    return ((u128)hi << 64) | lo;
}
#endif

/* x^64 = x^4 + x^3 + x + 1: fold the high word twice (the second fold has at most 4 bits) */
static inline uint64_t reduce(u128 v) {
    uint64_t lo = (uint64_t)v, hi = (uint64_t)(v >> 64);
    uint64_t t = hi ^ (hi >> 60) ^ (hi >> 61) ^ (hi >> 63);
    return lo ^ t ^ (t << 1) ^ (t << 3) ^ (t << 4);
}

/* M(g) = XOR over the 8 bytes j of g of tables[j][byte j]: a GF(2)-linear map of a word */
static inline uint64_t linear_map(const uint64_t *tables, uint64_t g) {
    uint64_t h = 0;
    for (int j = 0; j < 8; j++) h ^= tables[(j << 8) | ((g >> (8 * j)) & 0xff)];
    return h;
}

static int get(PyObject *obj, Py_buffer *view, int writable) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
    if (view->itemsize != 8) {
        PyErr_SetString(PyExc_TypeError, "gf64 kernels take uint64 buffers");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static void release_all(Py_buffer *views, int n) {
    for (int i = 0; i < n; i++) PyBuffer_Release(&views[i]);
}

/* the uint64 buffers of obj[0..n-1], those from ``first_out`` on writable; none is held if
 * one fails */
static int get_all(PyObject *const *obj, Py_buffer *views, int n, int first_out) {
    for (int i = 0; i < n; i++)
        if (get(obj[i], &views[i], i >= first_out) < 0) {
            release_all(views, i);
            return -1;
        }
    return 0;
}

#define WORDS(view) ((Py_ssize_t)((view).len / 8))
#define DATA(view) ((uint64_t *)(view).buf)

/* the 8 x 8 bit transpose of a word read as 8 byte rows: bit i of byte b of the result is
 * bit b of byte i of x */
static inline uint64_t transpose8(uint64_t x) {
    uint64_t t;
    t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAULL; x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCULL; x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ULL; x ^= t ^ (t << 28);
    return x;
}

/* the 8 x 8 byte transpose of 8 words read as byte rows: afterwards byte i of w[j] is what
 * byte j of w[i] was (three swaps of blocks of 4, 2 and 1 bytes between rows) */
static inline void transpose_bytes(uint64_t *w) {
    static const uint64_t low[3] = {0x00000000FFFFFFFFULL, 0x0000FFFF0000FFFFULL,
                                    0x00FF00FF00FF00FFULL};
    for (int stage = 0, s = 4; stage < 3; stage++, s >>= 1)
        for (int i = 0; i < 8; i++) {
            if (i & s) continue;
            uint64_t t = ((w[i] >> (8 * s)) ^ w[i + s]) & low[stage];
            w[i + s] ^= t;
            w[i] ^= t << (8 * s);
        }
}

#define MAX_GROUPS 64

#define KERNEL(name) name##_loop
#define CLMUL clmul_loop
#define TARGET
#include "_gf64_kernels.h"
#undef KERNEL
#undef CLMUL
#undef TARGET

#if defined(__x86_64__)
#define KERNEL(name) name##_hw
#define CLMUL clmul_hw
#define TARGET __attribute__((target("pclmul,sse4.1")))
#include "_gf64_kernels.h"
#undef KERNEL
#undef CLMUL
#undef TARGET
#endif

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_gf64", NULL, -1, methods_loop,
                                    NULL, NULL, NULL, NULL};
static struct PyModuleDef portable = {PyModuleDef_HEAD_INIT, "_gf64.portable", NULL, -1,
                                      methods_loop, NULL, NULL, NULL, NULL};

/* the module's kernels are the CPU's where it has a carry-less multiply; ``portable`` holds the
 * loop's, so that tests check both */
PyMODINIT_FUNC PyInit__gf64(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1"))
        module.m_methods = methods_hw;
#endif
    PyObject *m = PyModule_Create(&module), *loop;
    if (m == NULL) return NULL;
    if ((loop = PyModule_Create(&portable)) == NULL || PyModule_AddObject(m, "portable", loop) < 0) {
        Py_XDECREF(loop);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
