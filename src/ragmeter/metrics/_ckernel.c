/* ragmeter.metrics._ckernel: the compiled twin of ragmeter.metrics._kernel.py_score_query.
 *
 * score_query(ranked, judgements, ks, codes, relevance_level) returns exactly what the Python
 * kernel returns (the same floats, bit for bit: the same IEEE operations in the same order, in
 * _kvalues.h) on the inputs it recognises, and hands every other call to the Python kernel
 * unchanged, so the Python kernel stays the one reference for results *and* for errors.
 * Recognised inputs:
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
 * RunLoop (in _ckernel_run.c) scores a whole run's rankings the same way in one C loop.
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

#include "_ckernel.h"

static PyObject *fallback_kernel = NULL; /* the Python reference kernel */
static PyObject *repeated_error = NULL;  /* RepeatedDocsError */
static PyObject *float_zero = NULL;      /* 0.0 and 1.0, shared: most values are one of them */
static PyObject *float_one = NULL;

Log2Table ck_log2 = {NULL, 0};

int
ck_exact_double(PyObject *v, double *out)
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
#if PY_VERSION_HEX >= 0x030C0000 && !defined(Py_LIMITED_API)
        if (PyUnstable_Long_IsCompact((PyLongObject *)v)) { /* one digit: the usual grade */
            *out = (double)PyUnstable_Long_CompactValue((PyLongObject *)v);
            return 1;
        }
#elif !defined(Py_LIMITED_API)
        Py_ssize_t size = Py_SIZE(v);
        if (size >= -1 && size <= 1) { /* one digit (or 0): the usual grade */
            *out = (double)(size * (Py_ssize_t)((PyLongObject *)v)->ob_digit[0]);
            return 1;
        }
#endif
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

int
ck_parse_ints(PyObject *seq, int64_t *out, long long lo, long long hi, int ascending)
{
    if (!(PyList_CheckExact(seq) || PyTuple_CheckExact(seq))) {
        return 0;
    }
    PyObject *const *items = PySequence_Fast_ITEMS(seq);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyLong_CheckExact(items[i])) {
            return 0;
        }
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(items[i], &overflow);
        if (x == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (overflow || x < lo || x > hi || (ascending && i > 0 && x <= out[i - 1])) {
            return 0;
        }
        out[i] = (int64_t)x;
    }
    return 1;
}

PyObject *
ck_float(double x)
{
    if (x == 0.0 && !signbit(x)) { /* +0.0: the one float object, shared */
        return Py_NewRef(float_zero);
    }
    if (x == 1.0) {
        return Py_NewRef(float_one);
    }
    return PyFloat_FromDouble(x);
}

int
ck_scratch_fit(Scratch *s, Py_ssize_t n, Py_ssize_t nj, Py_ssize_t nk, Py_ssize_t nvals)
{
    Py_ssize_t cap = 8;
    while (cap < 2 * n) {
        cap <<= 1;
    }
    if (s->block != NULL && cap <= s->slots_cap && nj <= s->nj_cap && nk == s->nk &&
        nvals <= s->nvals) {
        return 0;
    }
    if (s->block != NULL) { /* grow by doubling, so a run of growing rankings reallocates
                               a few times only */
        cap = cap > s->slots_cap ? cap : s->slots_cap;
        nj = nj > 2 * s->nj_cap ? nj : (nj > s->nj_cap ? 2 * s->nj_cap : s->nj_cap);
        nvals = nvals > s->nvals ? nvals : s->nvals;
    }
    size_t size = (size_t)cap * sizeof(Slot) + tally_bytes(nj, nk) +
                  (size_t)nvals * sizeof(double);
    char *block = PyMem_Realloc(s->block, size);
    if (block == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(block, 0, (size_t)cap * sizeof(Slot)); /* stamp 0: never a ranking's */
    s->stamp = 0;
    s->block = block;
    s->slots_cap = cap;
    s->nj_cap = nj;
    s->nk = nk;
    s->nvals = nvals;
    s->slots = (Slot *)block;
    tally_place(&s->t, s->slots + cap, nj, nk);
    s->out = (double *)(block + (size - (size_t)nvals * sizeof(double)));
    return 0;
}

void
ck_scratch_free(Scratch *s)
{
    PyMem_Free(s->block);
    memset(s, 0, sizeof *s);
}

/* How many docs ahead of the one it reads the ranking loop asks for a doc's string: its
 * type and cached hash are then in cache when the loop reaches it (a run's million doc
 * strings are scattered over the heap; reading them one by one waits on memory each time). */
#define PREFETCH 16
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_OBJECT(p) __builtin_prefetch((const void *)(p), 0, 3)
#else
#define PREFETCH_OBJECT(p) ((void)(p))
#endif

/* The hash of an exact str (cached in the object after the first time). */
static inline Py_hash_t
str_hash(PyObject *s)
{
#if !defined(Py_LIMITED_API) && !defined(Py_GIL_DISABLED)
    Py_hash_t h = ((PyASCIIObject *)s)->hash;
    if (h != -1) {
        return h;
    }
#endif
    return PyObject_Hash(s);
}

/* Where `doc` (an exact str with hash h) sits in the table: its slot, or the empty slot that
 * ends its probe sequence. -1 (exception set) only if a comparison fails. */
static inline Py_ssize_t
probe(const Slot *slots, size_t mask, uint32_t stamp, PyObject *const *items, PyObject *doc,
      Py_hash_t h)
{
    size_t j = (size_t)h & mask;
    for (;;) {
        const Slot *s = &slots[j];
        if (s->stamp != stamp) {
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

int
ck_score_ranking(const Options *o, int want_judged, Scratch *s, PyObject *const *items,
                 Py_ssize_t n, PyObject *judgements, Py_ssize_t *nv)
{
    Py_ssize_t nvals = 0;
    for (Py_ssize_t ci = 0; ci < o->nc; ci++) { /* only MRR and MAP add an uncut value */
        nvals += o->nk + (o->codes[ci] == MRR || o->codes[ci] == MAP);
    }
    if (ck_scratch_fit(s, n, PyDict_GET_SIZE(judgements), o->nk, nvals) < 0) {
        return Q_ERROR;
    }
    Py_ssize_t cap = 8;
    while (cap < 2 * n) {
        cap <<= 1;
    }
    if (n >= UINT32_MAX) {
        return Q_OTHER;
    }
    Slot *slots = s->slots;
    size_t mask = (size_t)cap - 1;
    if (++s->stamp == 0) { /* wrapped around: clear the table once */
        memset(slots, 0, (size_t)s->slots_cap * sizeof(Slot));
        s->stamp = 1;
    }
    uint32_t stamp = s->stamp;
    int repeated = 0;
    for (Py_ssize_t i = 0; i < n && i < PREFETCH; i++) {
        PREFETCH_OBJECT(items[i]);
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* the ranking: position by id, and a repeat */
        if (i + PREFETCH < n) {
            PREFETCH_OBJECT(items[i + PREFETCH]);
        }
        PyObject *doc = items[i];
        if (!PyUnicode_CheckExact(doc)) {
            return Q_OTHER;
        }
        Py_hash_t h = str_hash(doc);
        Py_ssize_t j;
        if (h == -1 || (j = probe(slots, mask, stamp, items, doc, h)) < 0) {
            return Q_ERROR;
        }
        if (slots[j].stamp == stamp) {
            repeated = 1;
        }
        else {
            slots[j].hash = h;
            slots[j].index = (uint32_t)i;
            slots[j].stamp = stamp;
        }
    }
    Tally *t = &s->t;
    tally_start(t, o->nk);
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(judgements, &pos, &key, &value)) { /* one walk over the judgements */
        double g;
        if (!PyUnicode_CheckExact(key) || !ck_exact_double(value, &g)) {
            return Q_OTHER;
        }
        if (!want_judged && !tally_counts(o, g)) {
            continue;
        }
        Py_hash_t h = str_hash(key);
        Py_ssize_t j;
        if (h == -1 || (j = probe(slots, mask, stamp, items, key, h)) < 0) {
            return Q_ERROR;
        }
        /* rank 0: not retrieved */
        tally_add(o, t, g, slots[j].stamp == stamp ? (int64_t)slots[j].index + 1 : 0);
    }
    if (t->n_rel == 0) {
        return Q_NONE;
    }
    if (repeated) {
        return Q_REPEATED;
    }
    *nv = tally_values(o, t, n, &ck_log2, s->out);
    return *nv < 0 ? Q_ERROR : Q_SCORED;
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
    Options o = {0};
    if (level_obj != Py_None) {
        if (PyBool_Check(level_obj) || !ck_exact_double(level_obj, &o.level)) {
            return call_fallback(args, nargs, kwnames);
        }
        o.has_level = 1;
    }
    o.nk = PySequence_Fast_GET_SIZE(ks_obj);
    o.nc = PySequence_Fast_GET_SIZE(codes_obj);
    if (o.nk == 0) {
        return call_fallback(args, nargs, kwnames);
    }
    int64_t small[32], *ints = small;
    if (o.nk + o.nc > 32 && (ints = PyMem_Malloc((size_t)(o.nk + o.nc) * 8)) == NULL) {
        return PyErr_NoMemory();
    }
    Scratch s = {0};
    PyObject *result = NULL;
    Py_ssize_t nv = 0;
    int status = Q_OTHER;
    if (ck_parse_ints(ks_obj, ints, 1, EXACT_LIMIT, 1) &&
        ck_parse_ints(codes_obj, ints + o.nk, 0, N_CODES - 1, 0)) {
        o.ks = ints;
        o.codes = ints + o.nk;
        int want_judged = 0;
        for (Py_ssize_t ci = 0; ci < o.nc; ci++) {
            want_judged |= o.codes[ci] == JUDGED;
        }
        status = ck_score_ranking(&o, want_judged, &s, PySequence_Fast_ITEMS(ranked),
                                  PySequence_Fast_GET_SIZE(ranked), judgements, &nv);
    }
    if (status == Q_NONE) {
        result = Py_NewRef(Py_None);
    }
    else if (status == Q_REPEATED) {
        PyErr_SetNone(repeated_error != NULL ? repeated_error : PyExc_ValueError);
    }
    else if (status == Q_SCORED && (result = PyList_New(nv)) != NULL) {
        for (Py_ssize_t i = 0; i < nv; i++) {
            PyObject *f = ck_float(s.out[i]);
            if (f == NULL) {
                Py_CLEAR(result);
                break;
            }
            PyList_SET_ITEM(result, i, f);
        }
    }
    ck_scratch_free(&s);
    if (ints != small) {
        PyMem_Free(ints);
    }
    return status == Q_OTHER ? call_fallback(args, nargs, kwnames) : result;
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

/* Each key of the dict d at its position (n == len(d)), its hash taken from d's entries: one
 * visit to each key object, not two (a million qrels keys are a million cache misses). With
 * str_only, None as soon as a key is not an exact str (the check made in the same visit). */
static PyObject *
dict_positions(PyObject *d, PyObject *n_obj, int str_only)
{
    Py_ssize_t n = PyLong_AsSsize_t(n_obj);
    if (n != PyDict_GET_SIZE(d)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "zip_dict: values must be len(keys)");
        }
        return NULL;
    }
#if PY_VERSION_HEX < 0x030F0000 && !defined(Py_LIMITED_API)
    PyObject *out = _PyDict_NewPresized(n);
#else
    PyObject *out = PyDict_New();
#endif
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
#if PY_VERSION_HEX < 0x030D0000 && !defined(Py_LIMITED_API)
    Py_hash_t hash;
    while (out != NULL && _PyDict_Next(d, &pos, &key, &value, &hash)) {
        if (str_only && !PyUnicode_CheckExact(key)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyObject *at = PyLong_FromSsize_t(i++);
        Py_INCREF(key);
        if (at == NULL || _PyDict_SetItem_KnownHash(out, key, at, hash) < 0) {
            Py_CLEAR(out);
        }
#else
    while (out != NULL && PyDict_Next(d, &pos, &key, &value)) {
        if (str_only && !PyUnicode_CheckExact(key)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyObject *at = PyLong_FromSsize_t(i++);
        Py_INCREF(key);
        if (at == NULL || PyDict_SetItem(out, key, at) < 0) {
            Py_CLEAR(out);
        }
#endif
        Py_DECREF(key);
        Py_XDECREF(at);
    }
    return out;
}

/* zip_dict(keys, values): dict(zip(keys, values)) for a list of keys and a list of as many
 * values, or an int n == len(keys) for the values 0 .. n - 1 (each key's position), made at
 * its final size (no resizing, no tuple per item). zip_dict(d, len(d), True) for a dict d:
 * its keys' positions, or None when a key is not an exact str. */
static PyObject *
zip_dict(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if ((nargs == 2 || nargs == 3) && PyDict_CheckExact(args[0]) && PyLong_CheckExact(args[1])) {
        int str_only = nargs == 3 ? PyObject_IsTrue(args[2]) : 0;
        return str_only < 0 ? NULL : dict_positions(args[0], args[1], str_only);
    }
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "zip_dict(keys, values): keys must be a list");
        return NULL;
    }
    PyObject *keys = args[0], *values = args[1];
    Py_ssize_t n = PyList_GET_SIZE(keys);
    int positions = PyLong_CheckExact(values);
    if (positions ? PyLong_AsSsize_t(values) != n
                  : !PyList_CheckExact(values) || PyList_GET_SIZE(values) != n) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError,
                             "zip_dict: values must be a list as long as keys, or len(keys)");
        }
        return NULL;
    }
#if PY_VERSION_HEX < 0x030F0000 && !defined(Py_LIMITED_API)
    PyObject *out = _PyDict_NewPresized(n);
#else
    PyObject *out = PyDict_New();
#endif
    /* the lists are re-read each time: a key's __eq__ could change them */
    for (Py_ssize_t i = 0; out != NULL && i < PyList_GET_SIZE(keys); i++) {
        PyObject *value;
        if (positions) {
            value = PyLong_FromSsize_t(i);
        }
        else if (i < PyList_GET_SIZE(values)) {
            value = Py_NewRef(PyList_GET_ITEM(values, i));
        }
        else {
            break;
        }
        PyObject *key = Py_NewRef(PyList_GET_ITEM(keys, i));
        if (value == NULL || PyDict_SetItem(out, key, value) < 0) {
            Py_CLEAR(out);
        }
        Py_DECREF(key);
        Py_XDECREF(value);
    }
    return out;
}

/* rows_dict(ids, values, width, keys, order): {ids[i]: {keys[j]: values[p * width + j]}} with
 * p = order[i] (i when order is None): ragmeter.report.ColumnRows.to_dict in C. Each row is a
 * copy of one template dict of the keys (their hashes are not computed again), values 0.0 and
 * 1.0 are shared objects; the result is made at its final size. */
static PyObject *
rows_dict(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyList_CheckExact(args[0]) || !PyLong_CheckExact(args[2]) ||
        !PyTuple_CheckExact(args[3]) || (args[4] != Py_None && !PyList_CheckExact(args[4]))) {
        PyErr_SetString(PyExc_TypeError,
                        "rows_dict(ids: list, values: array('d'), width: int, keys: tuple, "
                        "order: list | None)");
        return NULL;
    }
    PyObject *ids = args[0], *keys = args[3], *order = args[4];
    Py_ssize_t width = PyLong_AsSsize_t(args[2]);
    Py_ssize_t n = PyList_GET_SIZE(ids), nkeys = PyTuple_GET_SIZE(keys);
    if (width < 0 && PyErr_Occurred()) {
        return NULL;
    }
    if (nkeys > width || (order != Py_None && PyList_GET_SIZE(order) != n)) {
        PyErr_SetString(PyExc_ValueError, "rows_dict: keys, width and order do not fit");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        return NULL;
    }
    PyObject *template = NULL, *out = NULL;
    if (view.format == NULL || strcmp(view.format, "d") != 0 ||
        view.len != (Py_ssize_t)sizeof(double) * width * n) {
        PyErr_SetString(PyExc_ValueError, "rows_dict: values must be width * len(ids) doubles");
        goto done;
    }
    const double *values = (const double *)view.buf;
    if ((template = PyDict_New()) == NULL) {
        goto done;
    }
    for (Py_ssize_t j = 0; j < nkeys; j++) {
        if (PyDict_SetItem(template, PyTuple_GET_ITEM(keys, j), Py_None) < 0) {
            goto done;
        }
    }
#if PY_VERSION_HEX < 0x030F0000 && !defined(Py_LIMITED_API)
    out = _PyDict_NewPresized(n);
#else
    out = PyDict_New();
#endif
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        Py_ssize_t place = i;
        if (order != Py_None) {
            PyObject *at = PyList_GET_ITEM(order, i);
            place = PyLong_Check(at) ? PyLong_AsSsize_t(at) : -1;
            if (place < 0 || place >= n) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_ValueError, "rows_dict: an order entry is out of range");
                }
                Py_CLEAR(out);
                break;
            }
        }
        PyObject *row = PyDict_Copy(template);
        const double *at = values + place * width;
        for (Py_ssize_t j = 0; row != NULL && j < nkeys; j++) {
            PyObject *f = ck_float(at[j]);
            if (f == NULL || PyDict_SetItem(row, PyTuple_GET_ITEM(keys, j), f) < 0) {
                Py_CLEAR(row);
            }
            Py_XDECREF(f);
        }
        if (row == NULL || PyDict_SetItem(out, PyList_GET_ITEM(ids, i), row) < 0) {
            Py_CLEAR(out);
        }
        Py_XDECREF(row);
    }
done:
    Py_XDECREF(template);
    PyBuffer_Release(&view);
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
PyDoc_STRVAR(zip_dict_doc,
             "zip_dict(keys, values, str_only=False)\n--\n\n"
             "dict(zip(keys, values)) made at its final size; values may be len(keys) for "
             "each key's position (keys: a list, or a dict for its keys; with str_only, "
             "None if a dict key is not an exact str).");
PyDoc_STRVAR(rows_dict_doc,
             "rows_dict(ids, values, width, keys, order)\n--\n\n"
             "{ids[i]: dict(zip(keys, values[p * width:]))}, p = order[i] or i: "
             "ragmeter.report.ColumnRows.to_dict in C.");
PyDoc_STRVAR(configure_doc,
             "configure(fallback, repeated_error)\n--\n\n"
             "Set the Python kernel that unrecognised inputs go to, and RepeatedDocsError.");

static PyMethodDef methods[] = {
    {"score_query", (PyCFunction)(void (*)(void))score_query, METH_FASTCALL | METH_KEYWORDS,
     score_query_doc},
    {"column_sums", (PyCFunction)(void (*)(void))column_sums, METH_FASTCALL, column_sums_doc},
    {"pack_doubles", pack_doubles, METH_O, pack_doubles_doc},
    {"zip_dict", (PyCFunction)(void (*)(void))zip_dict, METH_FASTCALL, zip_dict_doc},
    {"rows_dict", (PyCFunction)(void (*)(void))rows_dict, METH_FASTCALL, rows_dict_doc},
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
    if (log2_grow(&ck_log2, 1024) < 0) {
        return NULL;
    }
    if (float_zero == NULL && (float_zero = PyFloat_FromDouble(0.0)) == NULL) {
        return NULL;
    }
    if (float_one == NULL && (float_one = PyFloat_FromDouble(1.0)) == NULL) {
        return NULL;
    }
    if (PyType_Ready(&ck_RunLoopType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module != NULL && PyModule_AddObjectRef(module, "RunLoop", (PyObject *)&ck_RunLoopType) < 0) {
        Py_CLEAR(module);
    }
    return module;
}
