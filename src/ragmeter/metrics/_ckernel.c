/* ragmeter.metrics._ckernel: the compiled twin of ragmeter.metrics._kernel.py_score_query.
 *
 * score_query(ranked, judgements, ks, codes, relevance_level) returns exactly what the Python
 * kernel returns (the same floats, bit for bit: the same IEEE operations in the same order) on
 * the inputs it recognises, and hands every other call to the Python kernel unchanged, so the
 * Python kernel stays the one reference for results *and* for errors. Recognised inputs:
 *
 *   ranked           an exact list or tuple of exact str
 *   judgements       an exact dict with exact str keys and grades that are exact bool, or exact
 *                    int or float with |grade| <= 2**53 (ints compare exactly as doubles; a NaN,
 *                    infinite or larger grade is refused by the Python kernel)
 *   ks               an exact list or tuple of exact int, 1 <= k <= 2**53, strictly ascending
 *   codes            an exact list or tuple of exact int in 0..6 (NDCG ... MAP, JUDGED)
 *   relevance_level  None, an exact float, or an exact int with |level| <= 2**53
 *
 * Anything else (a str subclass, a numpy scalar, a non-numeric grade, a Mapping that is not a
 * dict, keyword arguments ...) goes to the Python kernel, which gives the result or raises the
 * error the driver already turns into its InvalidInputError. While a call is on the fast path
 * no Python code runs (exact str hash and compare are pure C, no object is allocated before the
 * result list), so the inputs cannot change under it and the call cannot be re-entered.
 *
 * Values of exactly +0.0 and 1.0 (most hit rates, many precisions and judged shares) are
 * returned as two shared float objects, so a query allocates only the floats that differ.
 *
 * column_sums(values, width) gives math.fsum of each column of a flat buffer of doubles (the
 * per-query values a run keeps), at C speed; see its comment below.
 *
 * configure(fallback, repeated_error) must be called once (ragmeter.metrics._kernel does) with
 * the Python kernel and the RepeatedDocsError class raised for a scored ranking that repeats a
 * doc id.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { NDCG, RECALL, PRECISION, HIT_RATE, MRR, MAP, JUDGED, N_CODES };

#define EXACT_LIMIT 9007199254740992LL /* 2**53: ints up to it are exact as doubles */

static PyObject *fallback_kernel = NULL; /* the Python reference kernel */
static PyObject *repeated_error = NULL;  /* RepeatedDocsError */
static PyObject *float_zero = NULL;      /* 0.0 and 1.0, shared: most values are one of them */
static PyObject *float_one = NULL;

/* log2_table[r] == log2(r + 1): the DCG discount of 1-based rank r (log2_table[0] unused). */
static double *log2_table = NULL;
static Py_ssize_t log2_size = 0;

typedef struct {
    Py_hash_t hash;
    Py_ssize_t index; /* position in ranked, -1 for an empty slot */
} Slot;

typedef struct {
    Py_ssize_t rank; /* 1-based */
    double grade;
} Hit;

/* Make log2_table cover ranks up to n; 0 on success, -1 (MemoryError set) on failure. */
static int
grow_log2(Py_ssize_t n)
{
    if (n < log2_size) {
        return 0;
    }
    Py_ssize_t size = log2_size ? 2 * log2_size : 1025;
    while (size <= n) {
        size *= 2;
    }
    double *table = PyMem_Realloc(log2_table, (size_t)size * sizeof(double));
    if (table == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (log2_size == 0) {
        table[0] = 0.0;
        log2_size = 1;
    }
    for (Py_ssize_t r = log2_size; r < size; r++) {
        table[r] = log2((double)(r + 1));
    }
    log2_table = table;
    log2_size = size;
    return 0;
}

/* A grade (or level) as a double: 1 if exact, 0 if the object is not a recognised number. */
static int
as_exact_double(PyObject *v, double *out)
{
    if (PyFloat_CheckExact(v)) {
        double x = PyFloat_AS_DOUBLE(v);
        /* NaN, infinities and huge grades go to the Python kernel, which refuses them */
        if (!(x >= -(double)EXACT_LIMIT && x <= (double)EXACT_LIMIT)) {
            return 0;
        }
        *out = x;
        return 1;
    }
    if (PyLong_CheckExact(v) || PyBool_Check(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (overflow || x > EXACT_LIMIT || x < -EXACT_LIMIT) {
            return 0;
        }
        *out = (double)x;
        return 1;
    }
    return 0;
}

/* An exact int in [lo, hi], or -1 when the object is anything else. */
static long long
small_int(PyObject *v, long long lo, long long hi)
{
    if (!PyLong_CheckExact(v)) {
        return -1;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    if (overflow || x < lo || x > hi) {
        return -1;
    }
    return x;
}

static int
cmp_rank(const void *a, const void *b)
{
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    return (x > y) - (x < y);
}

static int
cmp_hit(const void *a, const void *b)
{
    Py_ssize_t x = ((const Hit *)a)->rank, y = ((const Hit *)b)->rank;
    return (x > y) - (x < y);
}

static int
cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b; /* never NaN: grades are > 0 */
    return (x < y) - (x > y);
}

static void
sort_ranks(Py_ssize_t *v, Py_ssize_t n)
{
    if (n > 16) {
        qsort(v, (size_t)n, sizeof(Py_ssize_t), cmp_rank);
        return;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        Py_ssize_t x = v[i], j = i;
        for (; j > 0 && v[j - 1] > x; j--) {
            v[j] = v[j - 1];
        }
        v[j] = x;
    }
}

static void
sort_hits(Hit *v, Py_ssize_t n)
{
    if (n > 16) {
        qsort(v, (size_t)n, sizeof(Hit), cmp_hit);
        return;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        Hit x = v[i];
        Py_ssize_t j = i;
        for (; j > 0 && v[j - 1].rank > x.rank; j--) {
            v[j] = v[j - 1];
        }
        v[j] = x;
    }
}

static void
sort_desc(double *v, Py_ssize_t n)
{
    if (n > 16) {
        qsort(v, (size_t)n, sizeof(double), cmp_desc);
        return;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        double x = v[i];
        Py_ssize_t j = i;
        for (; j > 0 && v[j - 1] < x; j--) {
            v[j] = v[j - 1];
        }
        v[j] = x;
    }
}

/* Where `doc` (an exact str with hash h) sits in the table: its slot, or the empty slot that
 * ends its probe sequence. -1 (exception set) only if a comparison fails. */
static Py_ssize_t
probe(const Slot *slots, size_t mask, PyObject *const *items, PyObject *doc, Py_hash_t h)
{
    size_t j = (size_t)h & mask;
    for (;;) {
        const Slot *s = &slots[j];
        if (s->index < 0) {
            return (Py_ssize_t)j;
        }
        if (s->hash == h) {
            /* both exact str: identity, then unicode_eq, in C */
            int eq = PyObject_RichCompareBool(items[s->index], doc, Py_EQ);
            if (eq < 0) {
                return -1;
            }
            if (eq) {
                return (Py_ssize_t)j;
            }
        }
        j = (j + 1) & mask;
    }
}

static PyObject *
call_fallback(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (fallback_kernel == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "ragmeter.metrics._ckernel is not configured: import "
                        "ragmeter.metrics._kernel, which configures it");
        return NULL;
    }
    return PyObject_Vectorcall(fallback_kernel, args, (size_t)nargs, kwnames);
}

/* A sequence argument (ks, codes) parsed into `out` (capacity n): 1 ok, 0 not recognised. */
static int
parse_ints(PyObject *seq, Py_ssize_t *out, long long lo, long long hi, int ascending)
{
    PyObject *const *items = PySequence_Fast_ITEMS(seq);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        long long x = small_int(items[i], lo, hi);
        if (x < 0) {
            return 0;
        }
        if (ascending && i > 0 && x <= out[i - 1]) {
            return 0;
        }
        out[i] = (Py_ssize_t)x;
    }
    return 1;
}

static PyObject *
score_query(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames)
{
    if (nargs != 5 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)) {
        return call_fallback(args, nargs, kwnames);
    }
    PyObject *ranked = args[0], *judgements = args[1], *ks_obj = args[2], *codes_obj = args[3];
    PyObject *level_obj = args[4];
    if (!(PyList_CheckExact(ranked) || PyTuple_CheckExact(ranked)) ||
        !PyDict_CheckExact(judgements) ||
        !(PyList_CheckExact(ks_obj) || PyTuple_CheckExact(ks_obj)) ||
        !(PyList_CheckExact(codes_obj) || PyTuple_CheckExact(codes_obj))) {
        return call_fallback(args, nargs, kwnames);
    }
    int has_level = level_obj != Py_None;
    double level = 0.0;
    if (has_level && (PyBool_Check(level_obj) || !as_exact_double(level_obj, &level))) {
        return call_fallback(args, nargs, kwnames);
    }

    PyObject *const *items = PySequence_Fast_ITEMS(ranked);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(ranked);
    Py_ssize_t nj = PyDict_GET_SIZE(judgements);
    Py_ssize_t nk = PySequence_Fast_GET_SIZE(ks_obj);
    Py_ssize_t nc = PySequence_Fast_GET_SIZE(codes_obj);
    if (nk == 0) {
        return call_fallback(args, nargs, kwnames);
    }
    Py_ssize_t cap = 8;
    while (cap < 2 * n) {
        cap <<= 1;
    }
    Py_ssize_t nvals = nc * (nk + 1); /* an upper bound: only MRR and MAP add the uncut value */

    /* one block: every element below is 8 or 16 bytes, so each part stays aligned */
    size_t size = (size_t)cap * sizeof(Slot) + (size_t)nj * sizeof(Hit) +
                  (size_t)(3 * nk + nc + nj) * sizeof(Py_ssize_t) +
                  (size_t)(4 * (nj + 1) + nvals) * sizeof(double);
    char *block = PyMem_Malloc(size ? size : 1);
    if (block == NULL) {
        return PyErr_NoMemory();
    }
    Slot *slots = (Slot *)block;
    Hit *hits = (Hit *)(slots + cap);                 /* retrieved, grade > 0: the DCG gains */
    Py_ssize_t *ks = (Py_ssize_t *)(hits + nj);
    Py_ssize_t *counts = ks + nk;                     /* relevant ranks <= k, per k */
    Py_ssize_t *judged = counts + nk;                 /* judged ranks <= k, per k */
    Py_ssize_t *codes = judged + nk;
    Py_ssize_t *rel = codes + nc;                     /* ranks of the retrieved relevant docs */
    double *ideal = (double *)(rel + nj);             /* every grade > 0 */
    double *idcg = ideal + (nj + 1);
    double *dcg = idcg + (nj + 1);
    double *ap = dcg + (nj + 1);
    double *out = ap + (nj + 1);
    PyObject *result = NULL;

    if (!parse_ints(ks_obj, ks, 1, EXACT_LIMIT, 1) || !parse_ints(codes_obj, codes, 0, N_CODES - 1, 0)) {
        goto fallback;
    }
    int want_judged = 0;
    for (Py_ssize_t ci = 0; ci < nc; ci++) {
        want_judged |= codes[ci] == JUDGED;
    }
    memset(judged, 0, (size_t)nk * sizeof(Py_ssize_t));

    /* the ranking's doc ids: position by id, and whether one repeats */
    memset(slots, 0xff, (size_t)cap * sizeof(Slot)); /* index -1: empty */
    size_t mask = (size_t)cap - 1;
    int repeated = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *doc = items[i];
        if (!PyUnicode_CheckExact(doc)) {
            goto fallback;
        }
        Py_hash_t h = PyObject_Hash(doc);
        if (h == -1) {
            goto error;
        }
        Py_ssize_t j = probe(slots, mask, items, doc, h);
        if (j < 0) {
            goto error;
        }
        if (slots[j].index >= 0) {
            repeated = 1;
        }
        else {
            slots[j].hash = h;
            slots[j].index = i;
        }
    }

    /* one walk over the judgements */
    Py_ssize_t n_rel = 0, n_rel_hits = 0, n_hits = 0, n_ideal = 0, pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(judgements, &pos, &key, &value)) {
        double g;
        if (!PyUnicode_CheckExact(key) || !as_exact_double(value, &g)) {
            goto fallback;
        }
        int positive = g > 0;
        int relevant = has_level ? g >= level : positive;
        if (!relevant && !positive && !want_judged) {
            continue;
        }
        Py_hash_t h = PyObject_Hash(key);
        if (h == -1) {
            goto error;
        }
        Py_ssize_t j = probe(slots, mask, items, key, h);
        if (j < 0) {
            goto error;
        }
        Py_ssize_t r = slots[j].index + 1; /* 0: not retrieved */
        if (want_judged && r && r <= ks[nk - 1]) { /* counted at the first k >= r */
            Py_ssize_t lo = 0, hi = nk - 1;
            while (lo < hi) {
                Py_ssize_t mid = lo + (hi - lo) / 2;
                if (ks[mid] >= r) {
                    hi = mid;
                }
                else {
                    lo = mid + 1;
                }
            }
            judged[lo]++;
        }
        if (relevant) {
            n_rel++;
            if (r) {
                rel[n_rel_hits++] = r;
            }
        }
        if (positive) {
            ideal[n_ideal++] = g;
            if (r) {
                hits[n_hits].rank = r;
                hits[n_hits].grade = g;
                n_hits++;
            }
        }
    }
    if (n_rel == 0) {
        PyMem_Free(block);
        Py_RETURN_NONE;
    }
    if (repeated) {
        PyErr_SetNone(repeated_error != NULL ? repeated_error : PyExc_ValueError);
        goto error;
    }
    sort_ranks(rel, n_rel_hits);
    for (Py_ssize_t t = 0, c = 0; t < nk; t++) {
        while (c < n_rel_hits && rel[c] <= ks[t]) {
            c++;
        }
        counts[t] = c;
    }

    int have_ap = 0, have_ndcg = 0;
    Py_ssize_t last = 0;
    Py_ssize_t nv = 0;
    for (Py_ssize_t ci = 0; ci < nc; ci++) {
        switch (codes[ci]) {
        case PRECISION:
            for (Py_ssize_t t = 0; t < nk; t++) {
                out[nv++] = (double)counts[t] / (double)ks[t];
            }
            break;
        case RECALL:
            for (Py_ssize_t t = 0; t < nk; t++) {
                out[nv++] = (double)counts[t] / (double)n_rel;
            }
            break;
        case HIT_RATE:
            for (Py_ssize_t t = 0; t < nk; t++) {
                out[nv++] = counts[t] ? 1.0 : 0.0;
            }
            break;
        case MRR: {
            double rr = n_rel_hits ? 1.0 / (double)rel[0] : 0.0;
            for (Py_ssize_t t = 0; t < nk; t++) {
                out[nv++] = counts[t] ? rr : 0.0;
            }
            out[nv++] = rr;
            break;
        }
        case JUDGED: /* judged docs in the top min(k, n), over min(k, n); 0 for nothing */
            for (Py_ssize_t t = 0, c = 0; t < nk; t++) {
                c += judged[t];
                Py_ssize_t top = ks[t] < n ? ks[t] : n;
                out[nv++] = top ? (double)c / (double)top : 0.0;
            }
            break;
        case MAP:
            if (!have_ap) { /* ap[c]: sum of (relevant so far / rank) over the first c hits */
                double acc = 0.0;
                ap[0] = 0.0;
                for (Py_ssize_t j = 0; j < n_rel_hits; j++) {
                    acc += (double)(j + 1) / (double)rel[j];
                    ap[j + 1] = acc;
                }
                have_ap = 1;
            }
            for (Py_ssize_t t = 0; t < nk; t++) {
                out[nv++] = ap[counts[t]] / (double)n_rel;
            }
            out[nv++] = ap[n_rel_hits] / (double)n_rel;
            break;
        default: /* NDCG */
            if (n_hits == 0) {
                for (Py_ssize_t t = 0; t < nk; t++) {
                    out[nv++] = 0.0;
                }
                break;
            }
            if (!have_ndcg) {
                Py_ssize_t kmax = ks[nk - 1];
                sort_hits(hits, n_hits);
                sort_desc(ideal, n_ideal);
                last = n_ideal < kmax ? n_ideal : kmax;
                Py_ssize_t top = hits[n_hits - 1].rank > last ? hits[n_hits - 1].rank : last;
                if (grow_log2(top) < 0) {
                    goto error;
                }
                double acc = 0.0;
                idcg[0] = 0.0;
                for (Py_ssize_t i = 1; i <= last; i++) {
                    acc += ideal[i - 1] / log2_table[i];
                    idcg[i] = acc;
                }
                acc = 0.0;
                dcg[0] = 0.0;
                for (Py_ssize_t j = 0; j < n_hits; j++) {
                    acc += hits[j].grade / log2_table[hits[j].rank];
                    dcg[j + 1] = acc;
                }
                have_ndcg = 1;
            }
            for (Py_ssize_t t = 0, c = 0; t < nk; t++) {
                if (has_level) { /* gains within k; without a level they are the counts */
                    while (c < n_hits && hits[c].rank <= ks[t]) {
                        c++;
                    }
                }
                else {
                    c = counts[t];
                }
                out[nv++] = dcg[c] / idcg[ks[t] < last ? ks[t] : last];
            }
        }
    }

    result = PyList_New(nv);
    if (result == NULL) {
        goto error;
    }
    for (Py_ssize_t i = 0; i < nv; i++) {
        PyObject *f;
        if (out[i] == 0.0 && !signbit(out[i])) { /* +0.0: the one float object, shared */
            f = Py_NewRef(float_zero);
        }
        else if (out[i] == 1.0) {
            f = Py_NewRef(float_one);
        }
        else if ((f = PyFloat_FromDouble(out[i])) == NULL) {
            Py_CLEAR(result);
            goto error;
        }
        PyList_SET_ITEM(result, i, f);
    }
    PyMem_Free(block);
    return result;

fallback:
    PyMem_Free(block);
    return call_fallback(args, nargs, kwnames);

error:
    PyMem_Free(block);
    return NULL;
}

/* ---------------------------------------------------------------- column_sums
 *
 * column_sums(values, width): the exact sum of each column of `values` (a buffer of C doubles,
 * e.g. array('d'), read as rows of `width`), each rounded once to the nearest double (ties to
 * even), which is what math.fsum returns, so the means a report takes from them are
 * math.fsum's to the last bit. Each column keeps a short list of non-overlapping partial sums
 * (Shewchuk's exact two-sum expansion); the values are read row by row, in memory order.
 * Returns None, leaving the work to math.fsum, when a value is not finite, is -0.0 or is beyond
 * 2**900 (where a two-sum could overflow): never the case for the kernel's values.
 */

typedef struct {
    double *p;
    Py_ssize_t n, cap;
} Partials;

/* Add x to the expansion exactly; 0 on success, -1 (MemoryError set) on failure. */
static int
partials_add(Partials *s, double x)
{
    Py_ssize_t i = 0;
    for (Py_ssize_t j = 0; j < s->n; j++) {
        double y = s->p[j];
        if (fabs(x) < fabs(y)) {
            double t = x;
            x = y;
            y = t;
        }
        double hi = x + y;
        double lo = y - (hi - x); /* exact, since |x| >= |y| */
        if (lo != 0.0) {
            s->p[i++] = lo;
        }
        x = hi;
    }
    if (i >= s->cap) {
        Py_ssize_t cap = 2 * s->cap;
        double *p = PyMem_Realloc(s->p, (size_t)cap * sizeof(double));
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->p = p;
        s->cap = cap;
    }
    s->p[i++] = x;
    s->n = i;
    return 0;
}

/* The expansion's value rounded once to the nearest double, ties to even. */
static double
partials_round(const Partials *s)
{
    Py_ssize_t m = s->n;
    if (m == 0) {
        return 0.0;
    }
    double hi = s->p[--m], lo = 0.0;
    while (m > 0) { /* from the largest part down, until a part is not absorbed exactly */
        double x = hi, y = s->p[--m];
        hi = x + y;
        lo = y - (hi - x);
        if (lo != 0.0) {
            break;
        }
    }
    /* hi + lo was rounded half-way and the parts below push the same way: round the other way */
    if (m > 0 && ((lo < 0.0 && s->p[m - 1] < 0.0) || (lo > 0.0 && s->p[m - 1] > 0.0))) {
        double y = lo * 2.0, x = hi + y;
        if (y == x - hi) {
            hi = x;
        }
    }
    return hi;
}

static PyObject *
column_sums(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "column_sums(values, width) takes 2 arguments");
        return NULL;
    }
    Py_ssize_t width = PyLong_AsSsize_t(args[1]);
    if (width == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    Partials *cols = NULL;
    if (width < 1 || view.itemsize != sizeof(double) || view.format == NULL ||
        strcmp(view.format, "d") != 0 || view.len % ((Py_ssize_t)sizeof(double) * width)) {
        PyErr_SetString(PyExc_ValueError,
                        "column_sums: values must be doubles ('d'), a whole number of rows of "
                        "width >= 1");
        goto done;
    }
    const double *v = (const double *)view.buf;
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(double);
    cols = PyMem_Calloc((size_t)width, sizeof(Partials));
    if (cols == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < width; j++) {
        if ((cols[j].p = PyMem_Malloc(8 * sizeof(double))) == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        cols[j].cap = 8;
    }
    for (Py_ssize_t i = 0, j = 0; i < n; i++) {
        double x = v[i];
        if (!(fabs(x) <= 0x1p900) || (x == 0.0 && signbit(x))) {
            result = Py_NewRef(Py_None); /* math.fsum's business */
            goto done;
        }
        if (x != 0.0 && partials_add(&cols[j], x) < 0) {
            goto done;
        }
        if (++j == width) {
            j = 0;
        }
    }
    result = PyList_New(width);
    for (Py_ssize_t j = 0; result != NULL && j < width; j++) {
        PyObject *f = PyFloat_FromDouble(partials_round(&cols[j]));
        if (f == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, j, f);
    }
done:
    if (cols != NULL) {
        for (Py_ssize_t j = 0; j < width; j++) {
            PyMem_Free(cols[j].p);
        }
        PyMem_Free(cols);
    }
    PyBuffer_Release(&view);
    return result;
}

/* pack_doubles(values): a list of floats as the bytes of C doubles, for array('d').frombytes
 * (array('d', values) parses each item with a format string: ten times slower). */
static PyObject *
pack_doubles(PyObject *Py_UNUSED(module), PyObject *values)
{
    if (!PyList_CheckExact(values)) {
        PyErr_SetString(PyExc_TypeError, "pack_doubles: values must be a list of floats");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(values);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(double));
    if (out == NULL) {
        return NULL;
    }
    double *v = (double *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(values, i);
        if (PyFloat_CheckExact(item)) {
            v[i] = PyFloat_AS_DOUBLE(item);
        }
        else if ((v[i] = PyFloat_AsDouble(item)) == -1.0 && PyErr_Occurred()) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyObject *
configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *fallback, *error;
    if (!PyArg_ParseTuple(args, "OO:configure", &fallback, &error)) {
        return NULL;
    }
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "configure: fallback must be callable");
        return NULL;
    }
    if (!PyExceptionClass_Check(error)) {
        PyErr_SetString(PyExc_TypeError, "configure: repeated_error must be an exception class");
        return NULL;
    }
    Py_INCREF(fallback);
    Py_XSETREF(fallback_kernel, fallback);
    Py_INCREF(error);
    Py_XSETREF(repeated_error, error);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(score_query_doc,
             "score_query(ranked, judgements, ks, codes, relevance_level)\n--\n\n"
             "Compiled ragmeter.metrics._kernel.py_score_query: same values, same errors.");
PyDoc_STRVAR(column_sums_doc,
             "column_sums(values, width)\n--\n\n"
             "math.fsum of each column of a buffer of doubles read as rows of width values, "
             "or None\nwhen a value is not finite, is -0.0 or is beyond 2**900.");
PyDoc_STRVAR(pack_doubles_doc,
             "pack_doubles(values)\n--\n\n"
             "A list of floats as the bytes of C doubles (for array('d').frombytes).");
PyDoc_STRVAR(configure_doc,
             "configure(fallback, repeated_error)\n--\n\n"
             "Set the Python kernel that unrecognised inputs go to, and RepeatedDocsError.");

static PyMethodDef methods[] = {
    {"score_query", (PyCFunction)(void (*)(void))score_query, METH_FASTCALL | METH_KEYWORDS,
     score_query_doc},
    {"column_sums", (PyCFunction)(void (*)(void))column_sums, METH_FASTCALL, column_sums_doc},
    {"pack_doubles", pack_doubles, METH_O, pack_doubles_doc},
    {"configure", configure, METH_VARARGS, configure_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "ragmeter.metrics._ckernel",
    "Compiled per-query kernel of ragmeter.evaluate_run (optional; see _kernel.py).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__ckernel(void)
{
    if (grow_log2(1024) < 0) {
        return NULL;
    }
    if (float_zero == NULL && (float_zero = PyFloat_FromDouble(0.0)) == NULL) {
        return NULL;
    }
    if (float_one == NULL && (float_one = PyFloat_FromDouble(1.0)) == NULL) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
