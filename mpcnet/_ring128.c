/* Layer: arithmetic. The loops of mpcnet/ring128.py, compiled: numpy ufuncs over Z_2^128.
 *
 * An element is two uint64 limbs (lo, hi), passed as separate arrays, so each operation is one
 * generalised ufunc with numpy's broadcasting, strides and out= arguments, and one pass over
 * memory. The arithmetic is the compiler's unsigned __int128 (GCC and Clang on 64-bit
 * targets), whose wrap-around is exactly the reduction mod 2^128. Outputs must not overlap
 * inputs (numpy does not guard the core dimensions of a generalised ufunc): mpcnet.ring128
 * always passes fresh arrays.
 */
#define PY_SSIZE_T_CLEAN
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <numpy/ndarraytypes.h>
#include <numpy/ufuncobject.h>
#include <stdint.h>
#include <stdlib.h>

typedef unsigned __int128 u128;

#define LIMB(p) (*(const uint64_t *)(p))
#define PAIR(lo, hi) (((u128)LIMB(hi) << 64) | LIMB(lo))
#define STORE(lo, hi, v)                                \
    do {                                                \
        *(uint64_t *)(lo) = (uint64_t)(v);              \
        *(uint64_t *)(hi) = (uint64_t)((v) >> 64);      \
    } while (0)

/* a (op) b for two operands (a_lo, a_hi, b_lo, b_hi) -> (lo, hi) */
#define BINARY_LOOP(name, expr)                                                        \
    static void name(char **args, npy_intp const *dims, npy_intp const *steps,        \
                     void *data) {                                                     \
        (void)data;                                                                    \
        char *a0 = args[0], *a1 = args[1], *b0 = args[2], *b1 = args[3];               \
        char *o0 = args[4], *o1 = args[5];                                             \
        for (npy_intp i = 0; i < dims[0]; i++) {                                       \
            u128 a = PAIR(a0, a1), b = PAIR(b0, b1);                                   \
            u128 r = (expr);                                                           \
            STORE(o0, o1, r);                                                          \
            a0 += steps[0]; a1 += steps[1]; b0 += steps[2]; b1 += steps[3];            \
            o0 += steps[4]; o1 += steps[5];                                            \
        }                                                                              \
    }

BINARY_LOOP(add_loop, a + b)
BINARY_LOOP(sub_loop, a - b)
BINARY_LOOP(mul_loop, a * b)

/* a b + c d: the cross terms of a replicated product in one pass */
static void dot2_loop(char **args, npy_intp const *dims, npy_intp const *steps, void *data) {
    (void)data;
    char *p[10];
    for (int j = 0; j < 10; j++) p[j] = args[j];
    for (npy_intp i = 0; i < dims[0]; i++) {
        u128 r = PAIR(p[0], p[1]) * PAIR(p[2], p[3]) + PAIR(p[4], p[5]) * PAIR(p[6], p[7]);
        STORE(p[8], p[9], r);
        for (int j = 0; j < 10; j++) p[j] += steps[j];
    }
}

/* the high 64 bits of the 128-bit product of two uint64 words */
static void mulhi_loop(char **args, npy_intp const *dims, npy_intp const *steps, void *data) {
    (void)data;
    char *a = args[0], *b = args[1], *o = args[2];
    for (npy_intp i = 0; i < dims[0]; i++) {
        *(uint64_t *)o = (uint64_t)(((u128)LIMB(a) * LIMB(b)) >> 64);
        a += steps[0]; b += steps[1]; o += steps[2];
    }
}

/* (n),(n)->(),(): the sum over the core axis */
static void sum_loop(char **args, npy_intp const *dims, npy_intp const *steps, void *data) {
    (void)data;
    npy_intp n = dims[1];
    for (npy_intp outer = 0; outer < dims[0]; outer++) {
        char *a0 = args[0] + outer * steps[0], *a1 = args[1] + outer * steps[1];
        u128 total = 0;
        for (npy_intp t = 0; t < n; t++) total += PAIR(a0 + t * steps[4], a1 + t * steps[5]);
        STORE(args[2] + outer * steps[2], args[3] + outer * steps[3], total);
    }
}

/* (n) x 8 -> (),(): sum over the core axis of r0 (z0 + z1) + r1 z0, this party's term of the
 * dot product of a replicated r with a replicated z, without a temporary per element */
static void replicated_dot_loop(char **args, npy_intp const *dims, npy_intp const *steps,
                                void *data) {
    (void)data;
    npy_intp n = dims[1];
    const npy_intp *s = steps + 10; /* core strides of the eight inputs */
    for (npy_intp outer = 0; outer < dims[0]; outer++) {
        char *p[8];
        for (int j = 0; j < 8; j++) p[j] = args[j] + outer * steps[j];
        u128 total = 0;
        for (npy_intp t = 0; t < n; t++) {
            u128 z0 = PAIR(p[4] + t * s[4], p[5] + t * s[5]);
            u128 z1 = PAIR(p[6] + t * s[6], p[7] + t * s[7]);
            total += PAIR(p[0] + t * s[0], p[1] + t * s[1]) * (z0 + z1)
                     + PAIR(p[2] + t * s[2], p[3] + t * s[3]) * z0;
        }
        STORE(args[8] + outer * steps[8], args[9] + outer * steps[9], total);
    }
}

/* x y for a 64-bit x (the compiler then takes two products instead of three) */
static inline u128 mul_small(uint64_t x, u128 y) { return (u128)x * y; }

/* one entry of the product: row (lo, hi, stride) of a against the contiguous column y */
static u128 dot_column(const char *lo, const char *hi, npy_intp slo, npy_intp shi,
                       const u128 *y, npy_intp n, int small) {
    u128 c = 0;
    if (small)
        for (npy_intp t = 0; t < n; t++) c += mul_small(LIMB(lo + t * slo), y[t]);
    else
        for (npy_intp t = 0; t < n; t++) c += PAIR(lo + t * slo, hi + t * shi) * y[t];
    return c;
}

/* (m,n),(m,n),(n,k),(n,k)->(m,k),(m,k): the matrix product. b is copied once into columns of
 * contiguous 128-bit elements; the result is computed in 2 x 2 tiles whose four sums stay in
 * registers over the inner axis (two rows of a, two columns of b read once per tile), and a
 * pair of rows of a without high limbs (inputs) takes two products per term instead of three */
static void matmul_loop(char **args, npy_intp const *dims, npy_intp const *steps, void *data) {
    (void)data;
    npy_intp m = dims[1], n = dims[2], k = dims[3];
    const npy_intp *s = steps + 6; /* core strides: a0 (m, n), a1 (m, n), b0 (n, k), ... */
    u128 *bt = malloc(sizeof(u128) * (size_t)(k * n > 0 ? k * n : 1));
    unsigned char *small = malloc((size_t)(m > 0 ? m : 1));
    if (bt == NULL || small == NULL) { /* no memory: numpy sees the error after the loop */
        free(bt);
        free(small);
        NPY_ALLOW_C_API_DEF
        NPY_ALLOW_C_API
        PyErr_NoMemory();
        NPY_DISABLE_C_API
        return;
    }
    for (npy_intp outer = 0; outer < dims[0]; outer++) {
        char *a0 = args[0] + outer * steps[0], *a1 = args[1] + outer * steps[1];
        char *b0 = args[2] + outer * steps[2], *b1 = args[3] + outer * steps[3];
        char *o0 = args[4] + outer * steps[4], *o1 = args[5] + outer * steps[5];
        for (npy_intp t = 0; t < n; t++)
            for (npy_intp j = 0; j < k; j++)
                bt[j * n + t] = PAIR(b0 + t * s[4] + j * s[5], b1 + t * s[6] + j * s[7]);
        for (npy_intp i = 0; i < m; i++) {
            small[i] = 1;
            for (npy_intp t = 0; t < n && small[i]; t++)
                small[i] = LIMB(a1 + i * s[2] + t * s[3]) == 0;
        }
#define ROW_LO(i) (a0 + (i) * s[0])
#define ROW_HI(i) (a1 + (i) * s[2])
#define OUT(i, j, v) STORE(o0 + (i) * s[8] + (j) * s[9], o1 + (i) * s[10] + (j) * s[11], v)
        npy_intp i = 0;
        for (; i + 1 < m; i += 2) {
            const char *l0 = ROW_LO(i), *h0 = ROW_HI(i), *l1 = ROW_LO(i + 1), *h1 = ROW_HI(i + 1);
            int both_small = small[i] && small[i + 1];
            npy_intp j = 0;
            for (; j + 1 < k; j += 2) {
                const u128 *y0 = bt + j * n, *y1 = bt + (j + 1) * n;
                u128 c00 = 0, c01 = 0, c10 = 0, c11 = 0;
                if (both_small) {
                    for (npy_intp t = 0; t < n; t++) {
                        uint64_t x0 = LIMB(l0 + t * s[1]), x1 = LIMB(l1 + t * s[1]);
                        c00 += mul_small(x0, y0[t]);
                        c01 += mul_small(x0, y1[t]);
                        c10 += mul_small(x1, y0[t]);
                        c11 += mul_small(x1, y1[t]);
                    }
                } else {
                    for (npy_intp t = 0; t < n; t++) {
                        u128 x0 = PAIR(l0 + t * s[1], h0 + t * s[3]);
                        u128 x1 = PAIR(l1 + t * s[1], h1 + t * s[3]);
                        c00 += x0 * y0[t];
                        c01 += x0 * y1[t];
                        c10 += x1 * y0[t];
                        c11 += x1 * y1[t];
                    }
                }
                OUT(i, j, c00);
                OUT(i, j + 1, c01);
                OUT(i + 1, j, c10);
                OUT(i + 1, j + 1, c11);
            }
            for (; j < k; j++) {
                OUT(i, j, dot_column(l0, h0, s[1], s[3], bt + j * n, n, small[i]));
                OUT(i + 1, j, dot_column(l1, h1, s[1], s[3], bt + j * n, n, small[i + 1]));
            }
        }
        for (; i < m; i++)
            for (npy_intp j = 0; j < k; j++)
                OUT(i, j, dot_column(ROW_LO(i), ROW_HI(i), s[1], s[3], bt + j * n, n, small[i]));
#undef ROW_LO
#undef ROW_HI
#undef OUT
    }
    free(bt);
    free(small);
}

static char types_u64[10] = {NPY_UINT64, NPY_UINT64, NPY_UINT64, NPY_UINT64, NPY_UINT64,
                             NPY_UINT64, NPY_UINT64, NPY_UINT64, NPY_UINT64, NPY_UINT64};
static PyUFuncGenericFunction add_funcs[1] = {add_loop};
static PyUFuncGenericFunction sub_funcs[1] = {sub_loop};
static PyUFuncGenericFunction mul_funcs[1] = {mul_loop};
static PyUFuncGenericFunction dot2_funcs[1] = {dot2_loop};
static PyUFuncGenericFunction mulhi_funcs[1] = {mulhi_loop};
static PyUFuncGenericFunction sum_funcs[1] = {sum_loop};
static PyUFuncGenericFunction matmul_funcs[1] = {matmul_loop};
static PyUFuncGenericFunction replicated_dot_funcs[1] = {replicated_dot_loop};
static void *no_data[1] = {NULL};

static int add_ufunc(PyObject *module, PyUFuncGenericFunction *funcs, int nin, int nout,
                     const char *name, const char *doc, const char *signature) {
    PyObject *f = PyUFunc_FromFuncAndDataAndSignature(funcs, no_data, types_u64, 1, nin, nout,
                                                      PyUFunc_None, name, doc, 0, signature);
    if (f == NULL) return -1;
    if (PyModule_AddObject(module, name, f) < 0) {
        Py_DECREF(f);
        return -1;
    }
    return 0;
}

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_ring128",
                                       "Compiled Z_2^128 loops of mpcnet.ring128.", -1, NULL};

PyMODINIT_FUNC PyInit__ring128(void) {
    import_array();
    import_umath();
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    if (add_ufunc(m, add_funcs, 4, 2, "add", "a + b mod 2^128 on limbs", NULL) < 0
        || add_ufunc(m, sub_funcs, 4, 2, "sub", "a - b mod 2^128 on limbs", NULL) < 0
        || add_ufunc(m, mul_funcs, 4, 2, "mul", "a * b mod 2^128 on limbs", NULL) < 0
        || add_ufunc(m, dot2_funcs, 8, 2, "dot2", "a b + c d mod 2^128 on limbs", NULL) < 0
        || add_ufunc(m, mulhi_funcs, 2, 1, "mulhi", "high word of a 64 x 64-bit product",
                     NULL) < 0
        || add_ufunc(m, sum_funcs, 2, 2, "sum", "sum over the last axis mod 2^128",
                     "(n),(n)->(),()") < 0
        || add_ufunc(m, matmul_funcs, 4, 2, "matmul", "matrix product mod 2^128",
                     "(m,n),(m,n),(n,k),(n,k)->(m,k),(m,k)") < 0
        || add_ufunc(m, replicated_dot_funcs, 8, 2, "replicated_dot",
                     "sum of r0 (z0 + z1) + r1 z0 mod 2^128 over the last axis",
                     "(n),(n),(n),(n),(n),(n),(n),(n)->(),()") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
