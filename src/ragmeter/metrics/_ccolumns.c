/* ragmeter.metrics._ccolumns: the built-in retrieval metrics over a run held as columns.
 *
 * The compiled twin of ragmeter.metrics.columns.py_score_columns (see that module for the
 * contract). A run is three columns split in chunks (the chunks of an Arrow column): per row
 * the query's position in the qrels (-1: a query nobody judged, ignored), the doc's index in
 * one doc-id dictionary, and the score. The dictionary's strings (Arrow offsets and bytes)
 * order ties: each query's rows are ranked by score descending, then doc id descending,
 * bytewise (trec_eval's order, and Python's for UTF-8). No Python object is made per row.
 *
 * Per query the values are those of ragmeter.metrics._kernel.py_score_query on the same
 * ranking, bit for bit: the same IEEE operations in the same order (see _ckernel.c). A query's
 * rows need not be contiguous; when every judged query's rows are, no copy of the run is made
 * (the rows of one query at a time are gathered into a small buffer).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { NDCG, RECALL, PRECISION, HIT_RATE, MRR, MAP, JUDGED, N_CODES };

typedef struct {
    double score;
    int32_t doc; /* index in the doc-id dictionary */
} Entry;

typedef struct {
    int64_t rank; /* 1-based */
    double grade;
} Hit;

/* What one call shares: the dictionary (for ties), the qrels, the options, the outputs. */
typedef struct {
    const int64_t *offsets; /* the dictionary's string offsets (ndict + 1) */
    const char *data;       /* its UTF-8 bytes */
    int64_t ndict;
    const int64_t *jstart; /* query q's judgements: jstart[q] .. jstart[q + 1] */
    const int32_t *jdoc;   /* each judged doc's dictionary index, -1 if the run never has it */
    const double *jgrade;
    const int64_t *ks;
    Py_ssize_t nk;
    const int64_t *codes;
    Py_ssize_t nc;
    int has_level;
    double level;
    Py_ssize_t nv;     /* values per query */
    double *values;    /* nq * nv */
    int8_t *status;    /* 0 no ranking, 1 scored, 2 not scored (no relevant doc), 3 repeats */
    int64_t *lengths;  /* docs in each query's ranking */
    int64_t *found;    /* judged docs in each query's ranking */
    int32_t *pos;      /* ndict ranks, 0 between queries */
    double *log2_table; /* log2_table[r] == log2(r + 1) */
    int64_t log2_size;
    /* scratch per query, sized to the largest judgement count */
    Hit *hits;
    int64_t *rel;
    int64_t *counts;
    int64_t *judged;
    double *ideal, *idcg, *dcg, *ap;
} Ctx;

static const char *tie_data;        /* qsort has no context: the dictionary of the call */
static const int64_t *tie_offsets;  /* (set under the GIL, which the call holds) */

/* <0, 0, >0 as doc a's id sorts before, with, after doc b's (bytewise, then by length) */
static int
cmp_ids(int32_t a, int32_t b)
{
    if (a == b) {
        return 0;
    }
    int64_t la = tie_offsets[a + 1] - tie_offsets[a], lb = tie_offsets[b + 1] - tie_offsets[b];
    int c = memcmp(tie_data + tie_offsets[a], tie_data + tie_offsets[b],
                   (size_t)(la < lb ? la : lb));
    if (c) {
        return c;
    }
    return (la > lb) - (la < lb);
}

/* trec_eval's order: score descending, then doc id descending */
static int
cmp_entry(const void *pa, const void *pb)
{
    const Entry *a = pa, *b = pb;
    if (a->score != b->score) {
        return a->score > b->score ? -1 : 1;
    }
    return -cmp_ids(a->doc, b->doc);
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int
cmp_hit(const void *a, const void *b)
{
    int64_t x = ((const Hit *)a)->rank, y = ((const Hit *)b)->rank;
    return (x > y) - (x < y);
}

static int
cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static void
rank_entries(Entry *e, int64_t m)
{
    for (int64_t i = 1; i < m; i++) {
        if (cmp_entry(&e[i - 1], &e[i]) >= 0) { /* out of order (or a repeat): sort */
            qsort(e, (size_t)m, sizeof(Entry), cmp_entry);
            return;
        }
    }
}

static int
grow_log2(Ctx *c, int64_t n)
{
    if (n < c->log2_size) {
        return 0;
    }
    int64_t size = c->log2_size ? 2 * c->log2_size : 1025;
    while (size <= n) {
        size *= 2;
    }
    double *table = PyMem_Realloc(c->log2_table, (size_t)size * sizeof(double));
    if (table == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (c->log2_size == 0) {
        table[0] = 0.0;
        c->log2_size = 1;
    }
    for (int64_t r = c->log2_size; r < size; r++) {
        table[r] = log2((double)(r + 1));
    }
    c->log2_table = table;
    c->log2_size = size;
    return 0;
}

/* The values of query q from its n_rel relevant, n_hits gains and the judged counts. */
static int
write_values(Ctx *c, int64_t q, int64_t n, int64_t n_rel, int64_t n_rel_hits, int64_t n_hits,
             int64_t n_ideal)
{
    const int64_t *ks = c->ks;
    Py_ssize_t nk = c->nk;
    int64_t *rel = c->rel, *counts = c->counts;
    Hit *hits = c->hits;
    double *out = c->values + q * c->nv;
    qsort(rel, (size_t)n_rel_hits, sizeof(int64_t), cmp_i64);
    for (Py_ssize_t t = 0, k = 0; t < nk; t++) {
        while (k < n_rel_hits && rel[k] <= ks[t]) {
            k++;
        }
        counts[t] = k;
    }
    int have_ap = 0, have_ndcg = 0;
    int64_t last = 0;
    Py_ssize_t nv = 0;
    for (Py_ssize_t ci = 0; ci < c->nc; ci++) {
        switch (c->codes[ci]) {
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
        case JUDGED:
            for (Py_ssize_t t = 0, k = 0; t < nk; t++) {
                k += c->judged[t];
                int64_t top = ks[t] < n ? ks[t] : n;
                out[nv++] = top ? (double)k / (double)top : 0.0;
            }
            break;
        case MAP:
            if (!have_ap) {
                double acc = 0.0;
                c->ap[0] = 0.0;
                for (int64_t j = 0; j < n_rel_hits; j++) {
                    acc += (double)(j + 1) / (double)rel[j];
                    c->ap[j + 1] = acc;
                }
                have_ap = 1;
            }
            for (Py_ssize_t t = 0; t < nk; t++) {
                out[nv++] = c->ap[counts[t]] / (double)n_rel;
            }
            out[nv++] = c->ap[n_rel_hits] / (double)n_rel;
            break;
        default: /* NDCG */
            if (n_hits == 0) {
                for (Py_ssize_t t = 0; t < nk; t++) {
                    out[nv++] = 0.0;
                }
                break;
            }
            if (!have_ndcg) {
                int64_t kmax = ks[nk - 1];
                qsort(hits, (size_t)n_hits, sizeof(Hit), cmp_hit);
                qsort(c->ideal, (size_t)n_ideal, sizeof(double), cmp_desc);
                last = n_ideal < kmax ? n_ideal : kmax;
                int64_t top = hits[n_hits - 1].rank > last ? hits[n_hits - 1].rank : last;
                if (grow_log2(c, top) < 0) {
                    return -1;
                }
                double acc = 0.0;
                c->idcg[0] = 0.0;
                for (int64_t i = 1; i <= last; i++) {
                    acc += c->ideal[i - 1] / c->log2_table[i];
                    c->idcg[i] = acc;
                }
                acc = 0.0;
                c->dcg[0] = 0.0;
                for (int64_t j = 0; j < n_hits; j++) {
                    acc += hits[j].grade / c->log2_table[hits[j].rank];
                    c->dcg[j + 1] = acc;
                }
                have_ndcg = 1;
            }
            for (Py_ssize_t t = 0, k = 0; t < nk; t++) {
                if (c->has_level) {
                    while (k < n_hits && hits[k].rank <= ks[t]) {
                        k++;
                    }
                }
                else {
                    k = counts[t];
                }
                out[nv++] = c->dcg[k] / c->idcg[ks[t] < last ? ks[t] : last];
            }
        }
    }
    return 0;
}

/* Rank query q's m rows (in e) and score them: its status, length and values. */
static int
score_one(Ctx *c, int64_t q, Entry *e, int64_t m)
{
    rank_entries(e, m);
    int32_t *pos = c->pos;
    int repeated = 0;
    for (int64_t i = 0; i < m; i++) {
        if (pos[e[i].doc]) {
            repeated = 1;
        }
        else {
            pos[e[i].doc] = (int32_t)(i + 1);
        }
    }
    const int64_t *ks = c->ks;
    Py_ssize_t nk = c->nk;
    memset(c->judged, 0, (size_t)nk * sizeof(int64_t));
    int64_t n_rel = 0, n_rel_hits = 0, n_hits = 0, n_ideal = 0, found = 0;
    for (int64_t j = c->jstart[q]; j < c->jstart[q + 1]; j++) {
        double g = c->jgrade[j];
        int positive = g > 0;
        int relevant = c->has_level ? g >= c->level : positive;
        int32_t d = c->jdoc[j];
        int64_t r = d >= 0 ? pos[d] : 0; /* 0: not retrieved */
        if (r) {
            found++;
            if (r <= ks[nk - 1]) { /* counted at the first k >= r */
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
                c->judged[lo]++;
            }
        }
        if (relevant) {
            n_rel++;
            if (r) {
                c->rel[n_rel_hits++] = r;
            }
        }
        if (positive) {
            c->ideal[n_ideal++] = g;
            if (r) {
                c->hits[n_hits].rank = r;
                c->hits[n_hits].grade = g;
                n_hits++;
            }
        }
    }
    for (int64_t i = 0; i < m; i++) {
        pos[e[i].doc] = 0;
    }
    c->lengths[q] = m;
    c->found[q] = found;
    if (n_rel == 0) {
        c->status[q] = 2;
        return 0;
    }
    if (repeated) {
        c->status[q] = 3;
        return 0;
    }
    c->status[q] = 1;
    return write_values(c, q, m, n_rel, n_rel_hits, n_hits, n_ideal);
}

/* Buffers of one column's chunks, each checked for its item size and length. */
typedef struct {
    Py_buffer *views;
    Py_ssize_t n;
} Chunks;

static void
release_chunks(Chunks *ch)
{
    if (ch->views != NULL) {
        for (Py_ssize_t i = 0; i < ch->n; i++) {
            if (ch->views[i].obj != NULL) {
                PyBuffer_Release(&ch->views[i]);
            }
        }
        PyMem_Free(ch->views);
    }
    ch->views = NULL;
}

static int
get_chunks(PyObject *list, Py_ssize_t itemsize, Chunks *ch, const char *name)
{
    ch->views = NULL;
    ch->n = 0;
    if (!PyList_Check(list)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of buffers", name);
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    ch->views = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_buffer));
    if (ch->views == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    ch->n = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(list, i), &ch->views[i], PyBUF_C_CONTIGUOUS) < 0) {
            return -1;
        }
        if (ch->views[i].len % itemsize) {
            PyErr_Format(PyExc_ValueError, "%s: a buffer of %zd bytes is not of %zd-byte items",
                         name, ch->views[i].len, itemsize);
            return -1;
        }
    }
    return 0;
}

static int
get_array(PyObject *obj, Py_ssize_t itemsize, Py_buffer *view, Py_ssize_t want, const char *name,
          int writable)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        return -1;
    }
    if (view->len != want * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, expected %zd items of %zd bytes",
                     name, view->len, want, itemsize);
        return -1;
    }
    return 0;
}

/* Score every judged query: contiguous rows in one pass, else after a counting sort. */
static int
score_all(Ctx *c, Chunks *qs, Chunks *ds, Chunks *ss, int64_t nq, int64_t *first_dup)
{
    int64_t total = 0;
    for (Py_ssize_t k = 0; k < qs->n; k++) {
        Py_ssize_t len = qs->views[k].len / 4;
        if (ds->views[k].len / 4 != len || ss->views[k].len / 8 != len) {
            PyErr_SetString(PyExc_ValueError, "the run's columns differ in length");
            return -1;
        }
        total += len;
    }
    int64_t *first = PyMem_Malloc((size_t)(nq ? nq : 1) * sizeof(int64_t));
    int64_t *count = PyMem_Calloc((size_t)(nq + 1), sizeof(int64_t));
    if (first == NULL || count == NULL) {
        PyMem_Free(first);
        PyMem_Free(count);
        PyErr_NoMemory();
        return -1;
    }
    /* pass 1: rows per query, the first row of each, and whether each query's rows touch */
    int grouped = 1;
    int64_t row = 0, cur = -1;
    for (Py_ssize_t k = 0; k < qs->n; k++) {
        const int32_t *q = qs->views[k].buf;
        Py_ssize_t len = qs->views[k].len / 4;
        for (Py_ssize_t i = 0; i < len; i++, row++) {
            int32_t x = q[i];
            if (x < 0) {
                continue;
            }
            if (x >= nq) {
                PyErr_Format(PyExc_ValueError, "row %lld: query position %d out of range",
                             (long long)row, (int)x);
                goto fail;
            }
            if (x != cur) {
                if (count[x]) {
                    grouped = 0;
                }
                else {
                    first[x] = row;
                }
                cur = x;
            }
            count[x]++;
        }
    }
    int64_t most = 0, kept = 0;
    for (int64_t q = 0; q < nq; q++) {
        most = count[q] > most ? count[q] : most;
        kept += count[q];
    }
    Entry *entries = PyMem_Malloc((size_t)((grouped ? most : kept) + 1) * sizeof(Entry));
    if (entries == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    if (grouped) { /* gather one query at a time */
        int64_t m = 0;
        cur = -1;
        for (Py_ssize_t k = 0; k < qs->n; k++) {
            const int32_t *q = qs->views[k].buf;
            const int32_t *d = ds->views[k].buf;
            const double *s = ss->views[k].buf;
            Py_ssize_t len = qs->views[k].len / 4;
            for (Py_ssize_t i = 0; i < len; i++) {
                if (q[i] < 0) {
                    continue;
                }
                if (q[i] != cur) {
                    if (cur >= 0 && score_one(c, cur, entries, m) < 0) {
                        goto fail_entries;
                    }
                    cur = q[i];
                    m = 0;
                }
                entries[m].score = s[i];
                entries[m].doc = d[i];
                m++;
            }
        }
        if (cur >= 0 && score_one(c, cur, entries, m) < 0) {
            goto fail_entries;
        }
    }
    else { /* a counting sort by query (stable), then each query */
        int64_t acc = 0;
        for (int64_t q = 0; q <= nq; q++) {
            int64_t n = q < nq ? count[q] : 0;
            count[q] = acc;
            acc += n;
        }
        for (Py_ssize_t k = 0; k < qs->n; k++) {
            const int32_t *q = qs->views[k].buf;
            const int32_t *d = ds->views[k].buf;
            const double *s = ss->views[k].buf;
            Py_ssize_t len = qs->views[k].len / 4;
            for (Py_ssize_t i = 0; i < len; i++) {
                if (q[i] >= 0) {
                    Entry *e = &entries[count[q[i]]++];
                    e->score = s[i];
                    e->doc = d[i];
                }
            }
        }
        for (int64_t q = 0, start = 0; q < nq; q++) { /* count[q] is now q's end */
            if (count[q] > start && score_one(c, q, entries + start, count[q] - start) < 0) {
                goto fail_entries;
            }
            start = count[q];
        }
    }
    *first_dup = -1;
    int64_t best = -1;
    for (int64_t q = 0; q < nq; q++) {
        if (c->status[q] == 3 && (best < 0 || first[q] < best)) {
            best = first[q];
            *first_dup = q;
        }
    }
    PyMem_Free(entries);
    PyMem_Free(first);
    PyMem_Free(count);
    return 0;

fail_entries:
    PyMem_Free(entries);
fail:
    PyMem_Free(first);
    PyMem_Free(count);
    return -1;
}

static PyObject *
score_columns(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *qs_obj, *ds_obj, *ss_obj, *off_obj, *data_obj, *jstart_obj, *jdoc_obj, *jgrade_obj;
    PyObject *ks_obj, *codes_obj, *level_obj, *values_obj, *status_obj, *lengths_obj, *found_obj;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOO:score_columns", &qs_obj, &ds_obj, &ss_obj,
                          &off_obj, &data_obj, &jstart_obj, &jdoc_obj, &jgrade_obj, &ks_obj,
                          &codes_obj, &level_obj, &values_obj, &status_obj, &lengths_obj,
                          &found_obj)) {
        return NULL;
    }
    Ctx c;
    memset(&c, 0, sizeof c);
    Chunks qs = {0}, ds = {0}, ss = {0};
    Py_buffer off = {0}, data = {0}, jstart = {0}, jdoc = {0}, jgrade = {0}, ks = {0};
    Py_buffer codes = {0}, values = {0}, status = {0}, lengths = {0}, found = {0};
    PyObject *result = NULL;
    int64_t nq = 0, first_dup = -1;

    if (get_chunks(qs_obj, 4, &qs, "queries") < 0 || get_chunks(ds_obj, 4, &ds, "docs") < 0 ||
        get_chunks(ss_obj, 8, &ss, "scores") < 0) {
        goto done;
    }
    if (qs.n != ds.n || qs.n != ss.n) {
        PyErr_SetString(PyExc_ValueError, "the run's columns differ in their chunks");
        goto done;
    }
    if (PyObject_GetBuffer(off_obj, &off, PyBUF_C_CONTIGUOUS) < 0 ||
        PyObject_GetBuffer(data_obj, &data, PyBUF_C_CONTIGUOUS) < 0 ||
        PyObject_GetBuffer(jstart_obj, &jstart, PyBUF_C_CONTIGUOUS) < 0) {
        goto done;
    }
    if (off.len < 8 || off.len % 8 || jstart.len < 8 || jstart.len % 8) {
        PyErr_SetString(PyExc_ValueError, "offsets and jstart must be int64, one more than items");
        goto done;
    }
    c.ndict = off.len / 8 - 1;
    nq = jstart.len / 8 - 1;
    c.offsets = off.buf;
    c.data = data.buf;
    c.jstart = jstart.buf;
    int64_t nj = c.jstart[nq];
    if (c.offsets[c.ndict] > data.len || c.jstart[0] != 0 || nj < 0) {
        PyErr_SetString(PyExc_ValueError, "offsets or jstart do not fit their data");
        goto done;
    }
    if (get_array(jdoc_obj, 4, &jdoc, nj, "jdoc", 0) < 0 ||
        get_array(jgrade_obj, 8, &jgrade, nj, "jgrade", 0) < 0) {
        goto done;
    }
    if (PyObject_GetBuffer(ks_obj, &ks, PyBUF_C_CONTIGUOUS) < 0 ||
        PyObject_GetBuffer(codes_obj, &codes, PyBUF_C_CONTIGUOUS) < 0) {
        goto done;
    }
    c.nk = ks.len / 8;
    c.nc = codes.len / 8;
    c.ks = ks.buf;
    c.codes = codes.buf;
    if (c.nk == 0 || ks.len % 8 || codes.len % 8) {
        PyErr_SetString(PyExc_ValueError, "ks and codes must be int64, ks not empty");
        goto done;
    }
    c.nv = 0;
    for (Py_ssize_t i = 0; i < c.nc; i++) {
        if (c.codes[i] < 0 || c.codes[i] >= N_CODES) {
            PyErr_Format(PyExc_ValueError, "unknown metric code %lld", (long long)c.codes[i]);
            goto done;
        }
        c.nv += c.nk + (c.codes[i] == MRR || c.codes[i] == MAP);
    }
    for (Py_ssize_t i = 0; i < c.nk; i++) {
        if (c.ks[i] < 1 || (i && c.ks[i] <= c.ks[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "ks must be ascending, distinct and >= 1");
            goto done;
        }
    }
    if (level_obj != Py_None) {
        c.has_level = 1;
        c.level = PyFloat_AsDouble(level_obj);
        if (c.level == -1.0 && PyErr_Occurred()) {
            goto done;
        }
    }
    if (get_array(values_obj, 8, &values, nq * c.nv, "values", 1) < 0 ||
        get_array(status_obj, 1, &status, nq, "status", 1) < 0 ||
        get_array(lengths_obj, 8, &lengths, nq, "lengths", 1) < 0 ||
        get_array(found_obj, 8, &found, nq, "found", 1) < 0) {
        goto done;
    }
    c.jdoc = jdoc.buf;
    c.jgrade = jgrade.buf;
    c.values = values.buf;
    c.status = status.buf;
    c.lengths = lengths.buf;
    c.found = found.buf;
    for (int64_t j = 0; j < nj; j++) {
        if (c.jdoc[j] >= c.ndict) {
            PyErr_SetString(PyExc_ValueError, "jdoc holds an index beyond the dictionary");
            goto done;
        }
    }
    int64_t most = 1;
    for (int64_t q = 0; q < nq; q++) {
        int64_t n = c.jstart[q + 1] - c.jstart[q];
        if (n < 0) {
            PyErr_SetString(PyExc_ValueError, "jstart must not decrease");
            goto done;
        }
        most = n > most ? n : most;
    }
    memset(c.status, 0, (size_t)nq);
    c.pos = PyMem_Calloc((size_t)(c.ndict ? c.ndict : 1), sizeof(int32_t));
    c.hits = PyMem_Malloc((size_t)most * sizeof(Hit));
    c.rel = PyMem_Malloc((size_t)most * sizeof(int64_t));
    c.counts = PyMem_Malloc((size_t)c.nk * sizeof(int64_t));
    c.judged = PyMem_Malloc((size_t)c.nk * sizeof(int64_t));
    c.ideal = PyMem_Malloc((size_t)(4 * (most + 1)) * sizeof(double));
    if (c.pos == NULL || c.hits == NULL || c.rel == NULL || c.counts == NULL ||
        c.judged == NULL || c.ideal == NULL || grow_log2(&c, 1024) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    c.idcg = c.ideal + (most + 1);
    c.dcg = c.idcg + (most + 1);
    c.ap = c.dcg + (most + 1);
    /* every doc index of the run must be in the dictionary */
    for (Py_ssize_t k = 0; k < ds.n; k++) {
        const int32_t *d = ds.views[k].buf;
        Py_ssize_t len = ds.views[k].len / 4;
        for (Py_ssize_t i = 0; i < len; i++) {
            if (d[i] < 0 || d[i] >= c.ndict) {
                PyErr_SetString(PyExc_ValueError, "docs hold an index beyond the dictionary");
                goto done;
            }
        }
    }
    tie_data = c.data;
    tie_offsets = c.offsets;
    if (score_all(&c, &qs, &ds, &ss, nq, &first_dup) == 0) {
        result = PyLong_FromLongLong((long long)first_dup);
    }
    tie_data = NULL;
    tie_offsets = NULL;

done:
    PyMem_Free(c.pos);
    PyMem_Free(c.hits);
    PyMem_Free(c.rel);
    PyMem_Free(c.counts);
    PyMem_Free(c.judged);
    PyMem_Free(c.ideal);
    PyMem_Free(c.log2_table);
    release_chunks(&qs);
    release_chunks(&ds);
    release_chunks(&ss);
    Py_buffer *views[] = {&off, &data, &jstart, &jdoc, &jgrade, &ks, &codes,
                          &values, &status, &lengths, &found};
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
        if (views[i]->obj != NULL) {
            PyBuffer_Release(views[i]);
        }
    }
    return result;
}

PyDoc_STRVAR(score_columns_doc,
             "score_columns(queries, docs, scores, offsets, data, jstart, jdoc, jgrade, ks, "
             "codes, level, values, status, lengths, found)\n--\n\n"
             "Compiled ragmeter.metrics.columns.py_score_columns: fills values, status, lengths "
             "and found; returns the qrels position of the first query (by its first row) whose "
             "ranking repeats a doc and is scored, or -1.");

static PyMethodDef methods[] = {
    {"score_columns", score_columns, METH_VARARGS, score_columns_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "ragmeter.metrics._ccolumns",
    "Compiled columnar kernel of ragmeter.evaluate_run_columns (optional; see columns.py).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__ccolumns(void)
{
    return PyModule_Create(&module_def);
}
