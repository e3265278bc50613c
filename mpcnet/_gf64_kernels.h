/* Layer: arithmetic. The kernels of mpcnet/_gf64.c that multiply, included there twice: with
 * CLMUL the CPU's carry-less multiply (TARGET its target attribute) and with the portable loop,
 * so that the product inlines into every loop instead of being called through a pointer (half
 * the time of the bits' cross sums); the module picks one set when it loads. KERNEL(name)
 * names a kernel of the set. */

/* mul(a, b, out): out[i] = a[i] b[i]; a or b may hold one element (broadcast) */
TARGET static PyObject *KERNEL(py_mul)(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[3];
    if (!PyArg_ParseTuple(args, "OOO", &obj[0], &obj[1], &obj[2])) return NULL;
    Py_buffer v[3];
    if (get_all(obj, v, 3, 2) < 0) return NULL;
    Py_buffer a = v[0], b = v[1], o = v[2];
    Py_ssize_t n = WORDS(o), sa = WORDS(a) == 1 ? 0 : 1, sb = WORDS(b) == 1 ? 0 : 1;
    if ((sa && WORDS(a) != n) || (sb && WORDS(b) != n)) {
        PyErr_SetString(PyExc_ValueError, "gf64.mul: lengths differ");
    } else {
        const uint64_t *pa = DATA(a), *pb = DATA(b);
        uint64_t *po = DATA(o);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) po[i] = reduce(CLMUL(pa[i * sa], pb[i * sb]));
        Py_END_ALLOW_THREADS
    }
    release_all(v, 3);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* smul(a, b): a b for two scalars */
TARGET static PyObject *KERNEL(py_smul)(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long a, b;
    if (!PyArg_ParseTuple(args, "KK", &a, &b)) return NULL;
    return PyLong_FromUnsignedLongLong(reduce(CLMUL((uint64_t)a, (uint64_t)b)));
}

/* dot(a, b): the sum of a[i] b[i] */
TARGET static PyObject *KERNEL(py_dot)(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[2];
    if (!PyArg_ParseTuple(args, "OO", &obj[0], &obj[1])) return NULL;
    Py_buffer v[2];
    if (get_all(obj, v, 2, 2) < 0) return NULL;
    Py_buffer a = v[0], b = v[1];
    uint64_t r = 0;
    if (WORDS(a) != WORDS(b)) {
        PyErr_SetString(PyExc_ValueError, "gf64.dot: lengths differ");
    } else {
        const uint64_t *pa = DATA(a), *pb = DATA(b);
        Py_ssize_t n = WORDS(a);
        u128 acc = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) acc ^= CLMUL(pa[i], pb[i]);
        Py_END_ALLOW_THREADS
        r = reduce(acc);
    }
    release_all(v, 2);
    if (PyErr_Occurred()) return NULL;
    return PyLong_FromUnsignedLongLong(r);
}

/* weigh(words, eps, tables): the sum over k of eps[k] M(words[k]); tables (8, 256) */
TARGET static PyObject *KERNEL(py_weigh)(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[3];
    if (!PyArg_ParseTuple(args, "OOO", &obj[0], &obj[1], &obj[2])) return NULL;
    Py_buffer v[3];
    if (get_all(obj, v, 3, 3) < 0) return NULL;
    Py_buffer w = v[0], e = v[1], t = v[2];
    uint64_t r = 0;
    if (WORDS(w) != WORDS(e) || WORDS(t) != 8 * 256) {
        PyErr_SetString(PyExc_ValueError, "gf64.weigh: shapes");
    } else {
        const uint64_t *pw = DATA(w), *pe = DATA(e), *pt = DATA(t);
        Py_ssize_t n = WORDS(w);
        u128 acc = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t k = 0; k < n; k++) acc ^= CLMUL(pe[k], linear_map(pt, pw[k]));
        Py_END_ALLOW_THREADS
        r = reduce(acc);
    }
    release_all(v, 3);
    if (PyErr_Occurred()) return NULL;
    return PyLong_FromUnsignedLongLong(r);
}

/* cross(p0, p1, q0, q1, groups, eps, tables, out): p*, q* (groups, K) words, out (groups,
 * groups): out[l][l'] = sum over k of eps[k] M(p0[l][k] q0[l'][k] ^ p1[l][k] q1[l'][k]) with
 * AND and XOR on the words: the prover's sums of the first compression */
TARGET static PyObject *KERNEL(py_cross)(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[7];
    Py_ssize_t groups;
    if (!PyArg_ParseTuple(args, "OOOOnOOO", &obj[0], &obj[1], &obj[2], &obj[3], &groups,
                          &obj[4], &obj[5], &obj[6]))
        return NULL;
    Py_buffer v[7];
    if (get_all(obj, v, 7, 6) < 0) return NULL;
    Py_ssize_t n = WORDS(v[4]);
    int ok = groups > 0 && WORDS(v[6]) == groups * groups && WORDS(v[5]) == 8 * 256;
    for (int i = 0; i < 4; i++) ok = ok && WORDS(v[i]) == groups * n;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "gf64.cross: shapes");
    } else {
        const uint64_t *p0 = DATA(v[0]), *p1 = DATA(v[1]), *q0 = DATA(v[2]), *q1 = DATA(v[3]);
        const uint64_t *pe = DATA(v[4]), *pt = DATA(v[5]);
        uint64_t *po = DATA(v[6]);
        Py_ssize_t g2 = groups * groups;
        u128 *acc = (u128 *)PyMem_RawCalloc((size_t)g2, sizeof(u128));
        if (acc == NULL) {
            PyErr_NoMemory();
        } else {
            Py_BEGIN_ALLOW_THREADS
            for (Py_ssize_t k = 0; k < n; k++) {
                uint64_t e = pe[k];
                for (Py_ssize_t l = 0; l < groups; l++) {
                    uint64_t a0 = p0[l * n + k], a1 = p1[l * n + k];
                    for (Py_ssize_t m = 0; m < groups; m++) {
                        uint64_t g = (a0 & q0[m * n + k]) ^ (a1 & q1[m * n + k]);
                        if (g) acc[l * groups + m] ^= CLMUL(e, linear_map(pt, g));
                    }
                }
            }
            for (Py_ssize_t i = 0; i < g2; i++) po[i] = reduce(acc[i]);
            Py_END_ALLOW_THREADS
            PyMem_RawFree(acc);
        }
    }
    release_all(v, 7);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* tables[l][y] = lam[l] sum over the set bits h of y of mu[h] (L, 256) */
TARGET static void KERNEL(pair_tables)(const uint64_t *lam, Py_ssize_t groups, const uint64_t *mu,
                        uint64_t *tables) {
    uint64_t g[256];
    g[0] = 0;
    for (int y = 1; y < 256; y++) g[y] = g[y & (y - 1)] ^ mu[__builtin_ctz(y)];
    for (Py_ssize_t l = 0; l < groups; l++)
        for (int y = 0; y < 256; y++) tables[l * 256 + y] = reduce(CLMUL(lam[l], g[y]));
}

/* fold2(words, lam, mu, out): words (L, K) bits, lam (L), mu (8), out (8, K):
 * out[lo][k] = sum over l and h of lam[l] mu[h] bit 8 h + lo of words[l][k]: the first field
 * level (bit b = 8 h + lo of group l) folded at both of its first coins at once, straight
 * from the bits (each word's bytes transposed, one table lookup per byte) */
TARGET static PyObject *KERNEL(py_fold2)(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[4];
    if (!PyArg_ParseTuple(args, "OOOO", &obj[0], &obj[1], &obj[2], &obj[3])) return NULL;
    Py_buffer v[4];
    if (get_all(obj, v, 4, 3) < 0) return NULL;
    Py_buffer w = v[0], l = v[1], m = v[2], o = v[3];
    Py_ssize_t groups = WORDS(l), n = WORDS(o) / 8;
    uint64_t *tables = NULL;
    if (groups <= 0 || WORDS(m) != 8 || WORDS(o) != 8 * n || WORDS(w) != groups * n) {
        PyErr_SetString(PyExc_ValueError, "gf64.fold2: shapes");
    } else if ((tables = (uint64_t *)PyMem_RawMalloc((size_t)(groups * 256) * 8)) == NULL) {
        PyErr_NoMemory();
    } else {
        const uint64_t *pw = DATA(w);
        uint64_t *po = DATA(o);
        Py_BEGIN_ALLOW_THREADS
        KERNEL(pair_tables)(DATA(l), groups, DATA(m), tables);
        for (Py_ssize_t k = 0; k < n; k++) {
            uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (Py_ssize_t g = 0; g < groups; g++) {
                uint64_t x = transpose8(pw[g * n + k]);
                const uint64_t *table = tables + 256 * g;
                for (int lo = 0; lo < 8; lo++) acc[lo] ^= table[(x >> (8 * lo)) & 0xff];
            }
            for (int lo = 0; lo < 8; lo++) po[lo * n + k] = acc[lo];
        }
        Py_END_ALLOW_THREADS
        PyMem_RawFree(tables);
    }
    release_all(v, 4);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* bits_level(p0, p1, q0, q1, lam, mu, eps, out): p*, q* (L, K) bits, lam (L), mu (8), eps
 * (K), out (64): with a_t[b][k] = sum over l of lam[l] bit b of p_t[l][k] (b_t likewise from
 * q_t), out[8 h + h'] = sum over lo and k of mu[lo] eps[k] sum over t of a_t[8 h + lo][k]
 * b_t[8 h' + lo][k]: the cross sums of the level that folds h (the bits' high digit), from
 * which its polynomial follows; the field vectors are made a column at a time, never held */
TARGET static PyObject *KERNEL(py_bits_level)(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[8];
    if (!PyArg_ParseTuple(args, "OOOOOOOO", &obj[0], &obj[1], &obj[2], &obj[3], &obj[4],
                          &obj[5], &obj[6], &obj[7]))
        return NULL;
    Py_buffer v[8];
    if (get_all(obj, v, 8, 7) < 0) return NULL;
    Py_ssize_t groups = WORDS(v[4]), n = WORDS(v[6]);
    int ok = groups > 0 && WORDS(v[5]) == 8 && WORDS(v[7]) == 64;
    for (int i = 0; i < 4; i++) ok = ok && WORDS(v[i]) == groups * n;
    uint64_t *tables = NULL;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "gf64.bits_level: shapes");
    } else if ((tables = (uint64_t *)PyMem_RawMalloc((size_t)(groups * 256) * 8)) == NULL) {
        PyErr_NoMemory();
    } else {
        const uint64_t *src[4] = {DATA(v[0]), DATA(v[1]), DATA(v[2]), DATA(v[3])};
        const uint64_t *mu = DATA(v[5]), *eps = DATA(v[6]);
        uint64_t *po = DATA(v[7]);
        Py_BEGIN_ALLOW_THREADS
        u128 acc[64];
        memset(acc, 0, sizeof(acc));
        /* as fold: tables[c][y] = the sum of lam[8 c + i] over the set bits i of y */
        Py_ssize_t chunks = (groups + 7) / 8;
        for (Py_ssize_t c = 0; c < chunks; c++) {
            uint64_t *table = tables + 256 * c;
            table[0] = 0;
            for (int y = 1; y < 256; y++) {
                int i = __builtin_ctz(y);
                table[y] = table[y & (y - 1)] ^ (8 * c + i < groups ? DATA(v[4])[8 * c + i] : 0);
            }
        }
        uint64_t vec[4][64];
        for (Py_ssize_t k = 0; k < n; k++) {
            for (int t = 0; t < 4; t++) {
                uint64_t *out = vec[t];
                memset(out, 0, 64 * 8);
                for (Py_ssize_t c = 0; c < chunks; c++) {
                    const uint64_t *table = tables + 256 * c;
                    uint64_t col[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                    Py_ssize_t first = 8 * c, last = first + 8 < groups ? first + 8 : groups;
                    for (Py_ssize_t l = first; l < last; l++) col[l - first] = src[t][l * n + k];
                    transpose_bytes(col);  /* col[j] byte i: byte j of word i */
                    for (int j = 0; j < 8; j++) {
                        uint64_t x = transpose8(col[j]);
                        for (int b = 0; b < 8; b++) out[8 * j + b] ^= table[(x >> (8 * b)) & 0xff];
                    }
                }
            }
            uint64_t e = eps[k];
            for (int lo = 0; lo < 8; lo++) {
                uint64_t weight = reduce(CLMUL(mu[lo], e));
                for (int t = 0; t < 2; t++) {
                    uint64_t wa[8];
                    for (int h = 0; h < 8; h++) wa[h] = reduce(CLMUL(weight, vec[t][8 * h + lo]));
                    for (int h = 0; h < 8; h++)
                        for (int g = 0; g < 8; g++)
                            acc[8 * h + g] ^= CLMUL(wa[h], vec[2 + t][8 * g + lo]);
                }
            }
        }
        for (int i = 0; i < 64; i++) po[i] = reduce(acc[i]);
        Py_END_ALLOW_THREADS
        PyMem_RawFree(tables);
    }
    release_all(v, 8);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* combine(coefficients, rows, out): rows (L, n), out (n): out[i] = sum_l c_l rows[l][i] */
TARGET static PyObject *KERNEL(py_combine)(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[3];
    if (!PyArg_ParseTuple(args, "OOO", &obj[0], &obj[1], &obj[2])) return NULL;
    Py_buffer v[3];
    if (get_all(obj, v, 3, 2) < 0) return NULL;
    Py_buffer c = v[0], r = v[1], o = v[2];
    Py_ssize_t groups = WORDS(c), n = WORDS(o);
    if (groups <= 0 || WORDS(r) != groups * n) {
        PyErr_SetString(PyExc_ValueError, "gf64.combine: shapes");
    } else {
        const uint64_t *pc = DATA(c), *pr = DATA(r);
        uint64_t *po = DATA(o);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            u128 acc = 0;
            for (Py_ssize_t l = 0; l < groups; l++) acc ^= CLMUL(pc[l], pr[l * n + i]);
            po[i] = reduce(acc);
        }
        Py_END_ALLOW_THREADS
    }
    release_all(v, 3);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* level(u, v, theta, lam, out): u, v (L, n), theta (n), lam (E, L), out (L + E): the values
 * at the points 0..L+E-1 of sum_i theta_i U_i(X) V_i(X), U_i and V_i the polynomials through
 * u[., i] and v[., i] at 0..L-1 (lam[e] their Lagrange coefficients at the point L + e) */
TARGET static PyObject *KERNEL(py_level)(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &obj[0], &obj[1], &obj[2], &obj[3], &obj[4]))
        return NULL;
    Py_buffer v[5];
    if (get_all(obj, v, 5, 4) < 0) return NULL;
    Py_ssize_t n = WORDS(v[2]), out_len = WORDS(v[4]);
    Py_ssize_t groups = n > 0 ? WORDS(v[0]) / n : 0, extra = out_len - groups;
    if (n <= 0 || groups <= 0 || groups > MAX_GROUPS || extra < 0 ||
        WORDS(v[0]) != groups * n || WORDS(v[1]) != groups * n ||
        WORDS(v[3]) != extra * groups) {
        PyErr_SetString(PyExc_ValueError, "gf64.level: shapes");
    } else {
        const uint64_t *pu = DATA(v[0]), *pv = DATA(v[1]), *pt = DATA(v[2]), *pl = DATA(v[3]);
        uint64_t *po = DATA(v[4]);
        u128 *acc = (u128 *)PyMem_RawCalloc((size_t)out_len, sizeof(u128));
        if (acc == NULL) {
            PyErr_NoMemory();
        } else {
            Py_BEGIN_ALLOW_THREADS
            uint64_t wu[MAX_GROUPS], vv[MAX_GROUPS];
            for (Py_ssize_t i = 0; i < n; i++) {
                for (Py_ssize_t l = 0; l < groups; l++) {
                    wu[l] = reduce(CLMUL(pt[i], pu[l * n + i]));
                    vv[l] = pv[l * n + i];
                    acc[l] ^= CLMUL(wu[l], vv[l]);
                }
                for (Py_ssize_t e = 0; e < extra; e++) {
                    const uint64_t *lam = pl + e * groups;
                    u128 a = 0, b = 0;
                    for (Py_ssize_t l = 0; l < groups; l++) {
                        a ^= CLMUL(lam[l], wu[l]);
                        b ^= CLMUL(lam[l], vv[l]);
                    }
                    acc[groups + e] ^= CLMUL(reduce(a), reduce(b));
                }
            }
            for (Py_ssize_t j = 0; j < out_len; j++) po[j] = reduce(acc[j]);
            Py_END_ALLOW_THREADS
            PyMem_RawFree(acc);
        }
    }
    release_all(v, 5);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* the set's method table: KERNEL(methods) */
static PyMethodDef KERNEL(methods)[] = {
    {"smul", KERNEL(py_smul), METH_VARARGS, "a b for two scalars"},
    {"mul", KERNEL(py_mul), METH_VARARGS, "out[i] = a[i] b[i] in GF(2^64)"},
    {"dot", KERNEL(py_dot), METH_VARARGS, "the sum of a[i] b[i] in GF(2^64)"},
    {"weigh", KERNEL(py_weigh), METH_VARARGS, "the sum of eps[k] M(words[k])"},
    {"cross", KERNEL(py_cross), METH_VARARGS, "the prover's cross sums of the first compression"},
    {"combine", KERNEL(py_combine), METH_VARARGS, "sum_l c_l rows[l]"},
    {"level", KERNEL(py_level), METH_VARARGS, "the prover's polynomial of one level"},
    {"fold2", KERNEL(py_fold2), METH_VARARGS, "the first field level folded at two coins, from bits"},
    {"bits_level", KERNEL(py_bits_level), METH_VARARGS, "the cross sums of the bits' first level"},
    {NULL, NULL, 0, NULL},
};
