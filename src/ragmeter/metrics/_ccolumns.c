/* ragmeter.metrics._ccolumns: the built-in retrieval metrics over a run held as columns.
 *
 * The compiled twin of ragmeter.metrics.columns.py_score_columns (see that module for the
 * contract). A run is three columns split in chunks (the chunks of an Arrow table): the query
 * ids and doc ids as Arrow string buffers (offsets, 32- or 64-bit, and UTF-8 bytes) and the
 * scores (float64). No id is interned and no Python object is made per row: the rows of a
 * query are found by comparing each row's query id with the row before it (a changed id is
 * looked up in a hash table of the qrels' query ids), gathered into a small buffer, ranked by
 * score descending then doc id descending, bytewise (trec_eval's order, and Python's for
 * UTF-8), and matched with the query's judgements through a per-query hash table of its doc
 * ids (which also finds a repeated doc).
 *
 * Per query the values are those of ragmeter.metrics._kernel.py_score_query on the same
 * ranking, bit for bit: the same IEEE operations in the same order (in _kvalues.h, shared with
 * _ckernel.c). A query's rows need not be contiguous: every run of rows with one query id is a
 * segment, and a query's segments are scored together.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_kvalues.h"

typedef struct {
    double score;
    const char *id; /* the doc id's bytes (in the Arrow buffer) */
    int64_t len;
} Entry;

/* Strings of one Arrow string array: offsets of 4 or 8 bytes, and the UTF-8 data. */
typedef struct {
    Py_buffer offsets, data;
    int wide; /* 8-byte offsets */
    int64_t n;
} Strings;

static inline const char *
str_at(const Strings *s, int64_t i, int64_t *len)
{
    int64_t a, b;
    if (s->wide) {
        a = ((const int64_t *)s->offsets.buf)[i];
        b = ((const int64_t *)s->offsets.buf)[i + 1];
    }
    else {
        a = ((const int32_t *)s->offsets.buf)[i];
        b = ((const int32_t *)s->offsets.buf)[i + 1];
    }
    *len = b - a;
    return (const char *)s->data.buf + a;
}

static inline uint64_t
hash_bytes(const char *p, int64_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (int64_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

static inline int
same_bytes(const char *a, int64_t la, const char *b, int64_t lb)
{
    return la == lb && (la == 0 || memcmp(a, b, (size_t)la) == 0);
}

/* What one call shares: the qrels, the options, the outputs, the scratch. */
typedef struct {
    const int64_t *jstart; /* query q's judgements: jstart[q] .. jstart[q + 1] */
    const Strings *jdocs;  /* the judged doc ids */
    const double *jgrade;
    Options o;
    Py_ssize_t nv;     /* values per query */
    double *values;    /* nq * nv */
    int8_t *status;    /* 0 no ranking, 1 scored, 2 not scored (no relevant doc), 3 repeats */
    int64_t *lengths;  /* docs in each query's ranking */
    int64_t *found;    /* judged docs in each query's ranking */
    Log2Table log2s;   /* log2(r + 1) */
    int64_t *slots;    /* a query's doc table: entry index + 1, 0 empty */
    uint64_t *hashes;
    int64_t cap;
    Tally t;           /* scratch per query, sized to the largest judgement count */
    void *tally_mem;
} Ctx;

/* trec_eval's order: score descending, then doc id descending (bytewise, then longer) */
static int
cmp_entry(const void *pa, const void *pb)
{
    const Entry *a = pa, *b = pb;
    if (a->score != b->score) {
        return a->score > b->score ? -1 : 1;
    }
    int64_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->id, b->id, (size_t)n) : 0;
    if (c == 0) {
        c = (a->len > b->len) - (a->len < b->len);
    }
    return -c;
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

/* The doc table of a query: room for m docs at most half full; 0 ok, -1 no memory. */
static int64_t
doc_table(Ctx *c, int64_t m)
{
    int64_t cap = 16;
    while (cap < 2 * m) {
        cap <<= 1;
    }
    if (cap > c->cap) {
        int64_t *slots = PyMem_Realloc(c->slots, (size_t)cap * sizeof(int64_t));
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->slots = slots;
        uint64_t *hashes = PyMem_Realloc(c->hashes, (size_t)cap * sizeof(uint64_t));
        if (hashes == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->hashes = hashes;
        c->cap = cap;
    }
    return cap;
}

/* The slot of id (hash h) in the doc table of e: its own, or the empty one ending its probe. */
static inline int64_t
probe(const Ctx *c, int64_t mask, const Entry *e, const char *id, int64_t len, uint64_t h)
{
    int64_t j = (int64_t)(h & (uint64_t)mask);
    for (;;) {
        int64_t x = c->slots[j];
        if (x == 0) {
            return j;
        }
        if (c->hashes[j] == h && same_bytes(e[x - 1].id, e[x - 1].len, id, len)) {
            return j;
        }
        j = (j + 1) & mask;
    }
}

/* Rank query q's m rows (in e) and score them: its status, length and values. */
static int
score_one(Ctx *c, int64_t q, Entry *e, int64_t m)
{
    rank_entries(e, m);
    int64_t cap = 0;
    if ((cap = doc_table(c, m)) < 0) {
        return -1;
    }
    int64_t mask = cap - 1;
    memset(c->slots, 0, (size_t)cap * sizeof(int64_t));
    int repeated = 0;
    for (int64_t i = 0; i < m; i++) {
        uint64_t h = hash_bytes(e[i].id, e[i].len);
        int64_t j = probe(c, mask, e, e[i].id, e[i].len, h);
        if (c->slots[j]) {
            repeated = 1;
        }
        else {
            c->slots[j] = i + 1;
            c->hashes[j] = h;
        }
    }
    Tally *t = &c->t;
    tally_start(t, c->o.nk);
    int64_t found = 0;
    for (int64_t j = c->jstart[q]; j < c->jstart[q + 1]; j++) {
        int64_t len;
        const char *id = str_at(c->jdocs, j, &len);
        /* r: the 1-based rank, 0 when not retrieved */
        int64_t r = m ? c->slots[probe(c, mask, e, id, len, hash_bytes(id, len))] : 0;
        found += r != 0;
        tally_add(&c->o, t, c->jgrade[j], r);
    }
    c->lengths[q] = m;
    c->found[q] = found;
    if (t->n_rel == 0) {
        c->status[q] = 2;
        return 0;
    }
    if (repeated) {
        c->status[q] = 3;
        return 0;
    }
    c->status[q] = 1;
    return tally_values(&c->o, t, m, &c->log2s, c->values + q * c->nv) < 0 ? -1 : 0;
}

/* One Arrow string array from (offsets, data): offsets int32 or int64, n + 1 of them. */
static int
get_strings(PyObject *pair, Strings *s, const char *name)
{
    memset(s, 0, sizeof *s);
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        PyErr_Format(PyExc_TypeError, "%s: expected (offsets, data)", name);
        return -1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(pair, 0), &s->offsets,
                           PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(pair, 1), &s->data, PyBUF_C_CONTIGUOUS) < 0) {
        return -1;
    }
    Py_ssize_t size = s->offsets.itemsize;
    if ((size != 4 && size != 8) || s->offsets.len < size) {
        PyErr_Format(PyExc_ValueError, "%s: offsets must be int32 or int64", name);
        return -1;
    }
    s->wide = size == 8;
    s->n = s->offsets.len / size - 1;
    int64_t len;
    const char *first = str_at(s, 0, &len);
    const char *last = str_at(s, s->n, &len);
    if (first < (const char *)s->data.buf || last > (const char *)s->data.buf + s->data.len) {
        PyErr_Format(PyExc_ValueError, "%s: offsets beyond the data", name);
        return -1;
    }
    for (int64_t i = 0; i < s->n; i++) { /* offsets must not decrease */
        if (str_at(s, i, &len), len < 0) {
            PyErr_Format(PyExc_ValueError, "%s: offsets decrease", name);
            return -1;
        }
    }
    return 0;
}

static void
release_strings(Strings *s)
{
    if (s->offsets.obj != NULL) {
        PyBuffer_Release(&s->offsets);
    }
    if (s->data.obj != NULL) {
        PyBuffer_Release(&s->data);
    }
}

/* A run of rows with one query id, within one chunk. */
typedef struct {
    int64_t chunk, start, count, next; /* next: the query's next segment, -1 */
} Segment;

/* The columns of the run: per chunk, query ids, doc ids and scores. */
typedef struct {
    Strings *q, *d;
    Py_buffer *s;
    Py_ssize_t n;
} Run;

/* The qrels' query ids as a hash table: position by id. */
typedef struct {
    const Strings *ids;
    int64_t *slots; /* position + 1, 0 empty */
    int64_t mask;
} QueryTable;

static int64_t
find_query(const QueryTable *t, const char *id, int64_t len)
{
    int64_t j = (int64_t)(hash_bytes(id, len) & (uint64_t)t->mask);
    for (;;) {
        int64_t x = t->slots[j];
        if (x == 0) {
            return -1;
        }
        int64_t l;
        const char *p = str_at(t->ids, x - 1, &l);
        if (same_bytes(p, l, id, len)) {
            return x - 1;
        }
        j = (j + 1) & t->mask;
    }
}

/* Split the run into segments, each linked to its query's list: the segments' count, or -1. */
static int64_t
segments(const Run *run, const QueryTable *t, int64_t nq, Segment **out, int64_t *head,
         int64_t *first)
{
    int64_t cap = 1024, n = 0, row = 0;
    Segment *seg = PyMem_Malloc((size_t)cap * sizeof(Segment));
    int64_t *tail = PyMem_Malloc((size_t)(nq ? nq : 1) * sizeof(int64_t));
    if (seg == NULL || tail == NULL) {
        PyMem_Free(seg);
        PyMem_Free(tail);
        PyErr_NoMemory();
        return -1;
    }
    for (int64_t q = 0; q < nq; q++) {
        head[q] = -1;
    }
    for (Py_ssize_t k = 0; k < run->n; k++) {
        const Strings *qs = &run->q[k];
        const char *prev = NULL;
        int64_t prev_len = -1, cur = -1;
        for (int64_t i = 0; i < qs->n; i++, row++) {
            int64_t len;
            const char *id = str_at(qs, i, &len);
            if (prev != NULL && same_bytes(prev, prev_len, id, len)) {
                if (cur >= 0) {
                    seg[n - 1].count++;
                }
                continue;
            }
            prev = id;
            prev_len = len;
            cur = find_query(t, id, len);
            if (cur < 0) {
                continue;
            }
            if (n == cap) {
                cap *= 2;
                Segment *grown = PyMem_Realloc(seg, (size_t)cap * sizeof(Segment));
                if (grown == NULL) {
                    PyMem_Free(seg);
                    PyMem_Free(tail);
                    PyErr_NoMemory();
                    return -1;
                }
                seg = grown;
            }
            seg[n] = (Segment){k, i, 1, -1};
            if (head[cur] < 0) {
                head[cur] = n;
                first[cur] = row;
            }
            else {
                seg[tail[cur]].next = n;
            }
            tail[cur] = n;
            n++;
        }
    }
    PyMem_Free(tail);
    *out = seg;
    return n;
}

/* Score every judged query that has rows, in qrels order. */
static int
score_all(Ctx *c, const Run *run, const QueryTable *t, int64_t nq, int64_t *first_dup)
{
    int64_t *head = PyMem_Malloc((size_t)(nq ? nq : 1) * sizeof(int64_t));
    int64_t *first = PyMem_Malloc((size_t)(nq ? nq : 1) * sizeof(int64_t));
    Segment *seg = NULL;
    Entry *entries = NULL;
    int rc = -1;
    if (head == NULL || first == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t nseg = segments(run, t, nq, &seg, head, first);
    if (nseg < 0) {
        goto done;
    }
    int64_t cap = 0;
    *first_dup = -1;
    for (int64_t q = 0; q < nq; q++) { /* (a first pass: no query may be scored already) */
        if (head[q] >= 0 && c->status[q] != 0) {
            *first_dup = -2;
            rc = 0;
            goto done;
        }
    }
    for (int64_t q = 0; q < nq; q++) {
        if (head[q] < 0) {
            continue;
        }
        int64_t m = 0;
        for (int64_t x = head[q]; x >= 0; x = seg[x].next) {
            m += seg[x].count;
        }
        if (m > cap) {
            cap = m > 2 * cap ? m : 2 * cap;
            Entry *grown = PyMem_Realloc(entries, (size_t)cap * sizeof(Entry));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            entries = grown;
        }
        m = 0;
        for (int64_t x = head[q]; x >= 0; x = seg[x].next) {
            const Strings *ds = &run->d[seg[x].chunk];
            const double *s = run->s[seg[x].chunk].buf;
            for (int64_t i = seg[x].start; i < seg[x].start + seg[x].count; i++) {
                entries[m].score = s[i];
                entries[m].id = str_at(ds, i, &entries[m].len);
                m++;
            }
        }
        if (score_one(c, q, entries, m) < 0) {
            goto done;
        }
        if (c->status[q] == 3 && (*first_dup < 0 || first[q] < first[*first_dup])) {
            *first_dup = q;
        }
    }
    rc = 0;
done:
    PyMem_Free(head);
    PyMem_Free(first);
    PyMem_Free(seg);
    PyMem_Free(entries);
    return rc;
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

/* The run's chunks: (query ids, doc ids, scores) per chunk, of one length each. */
static int
get_run(PyObject *chunks, Run *run)
{
    memset(run, 0, sizeof *run);
    if (!PyList_Check(chunks)) {
        PyErr_SetString(PyExc_TypeError, "chunks must be a list of (queries, docs, scores)");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(chunks);
    run->q = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Strings));
    run->d = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Strings));
    run->s = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_buffer));
    if (run->q == NULL || run->d == NULL || run->s == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    run->n = n;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyList_GET_ITEM(chunks, k);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_TypeError, "a chunk must be (queries, docs, scores)");
            return -1;
        }
        if (get_strings(PyTuple_GET_ITEM(item, 0), &run->q[k], "queries") < 0 ||
            get_strings(PyTuple_GET_ITEM(item, 1), &run->d[k], "docs") < 0 ||
            get_array(PyTuple_GET_ITEM(item, 2), 8, &run->s[k], run->q[k].n, "scores", 0) < 0) {
            return -1;
        }
        if (run->d[k].n != run->q[k].n) {
            PyErr_SetString(PyExc_ValueError, "a chunk's columns differ in length");
            return -1;
        }
    }
    return 0;
}

static void
release_run(Run *run)
{
    for (Py_ssize_t k = 0; k < run->n; k++) {
        release_strings(&run->q[k]);
        release_strings(&run->d[k]);
        if (run->s[k].obj != NULL) {
            PyBuffer_Release(&run->s[k]);
        }
    }
    PyMem_Free(run->q);
    PyMem_Free(run->d);
    PyMem_Free(run->s);
}

/* The options: ks (ascending, >= 1), codes, the level; the values per query. */
static int
get_options(Ctx *c, Py_buffer *ks, Py_buffer *codes, PyObject *level)
{
    Options *o = &c->o;
    o->nk = ks->len / 8;
    o->nc = codes->len / 8;
    o->ks = ks->buf;
    o->codes = codes->buf;
    if (o->nk == 0 || ks->len % 8 || codes->len % 8) {
        PyErr_SetString(PyExc_ValueError, "ks and codes must be int64, ks not empty");
        return -1;
    }
    c->nv = 0;
    for (Py_ssize_t i = 0; i < o->nc; i++) {
        if (o->codes[i] < 0 || o->codes[i] >= N_CODES) {
            PyErr_Format(PyExc_ValueError, "unknown metric code %lld", (long long)o->codes[i]);
            return -1;
        }
        c->nv += o->nk + (o->codes[i] == MRR || o->codes[i] == MAP);
    }
    for (Py_ssize_t i = 0; i < o->nk; i++) {
        if (o->ks[i] < 1 || (i && o->ks[i] <= o->ks[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "ks must be ascending, distinct and >= 1");
            return -1;
        }
    }
    if (level != Py_None) {
        o->has_level = 1;
        o->level = PyFloat_AsDouble(level);
        if (o->level == -1.0 && PyErr_Occurred()) {
            return -1;
        }
    }
    return 0;
}

/* The qrels' query ids in a hash table (a repeated id is refused). */
static int
query_table(QueryTable *t, const Strings *ids)
{
    int64_t cap = 16;
    while (cap < 2 * ids->n) {
        cap <<= 1;
    }
    t->ids = ids;
    t->mask = cap - 1;
    t->slots = PyMem_Calloc((size_t)cap, sizeof(int64_t));
    if (t->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int64_t i = 0; i < ids->n; i++) {
        int64_t len;
        const char *id = str_at(ids, i, &len);
        int64_t j = (int64_t)(hash_bytes(id, len) & (uint64_t)t->mask);
        while (t->slots[j]) {
            int64_t l;
            const char *p = str_at(ids, t->slots[j] - 1, &l);
            if (same_bytes(p, l, id, len)) {
                PyErr_SetString(PyExc_ValueError, "the qrels' query ids repeat");
                return -1;
            }
            j = (j + 1) & t->mask;
        }
        t->slots[j] = i + 1;
    }
    return 0;
}

/* A table query_slots built for these ids: checked (size, entries), not rebuilt. */
static int
given_table(QueryTable *t, const Strings *ids, const Py_buffer *slots)
{
    int64_t cap = slots->len / 8;
    if (slots->len % 8 || cap < 16 || (cap & (cap - 1)) || cap < 2 * ids->n) {
        PyErr_SetString(PyExc_ValueError, "slots: not a table from query_slots for these ids");
        return -1;
    }
    const int64_t *x = slots->buf;
    for (int64_t j = 0; j < cap; j++) {
        if (x[j] < 0 || x[j] > ids->n) {
            PyErr_SetString(PyExc_ValueError, "slots: not a table from query_slots for these ids");
            return -1;
        }
    }
    t->ids = ids;
    t->mask = cap - 1;
    t->slots = (int64_t *)slots->buf;
    return 0;
}

static PyObject *
query_slots(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Strings ids;
    QueryTable t = {0};
    PyObject *out = NULL;
    if (get_strings(arg, &ids, "query_ids") == 0 && query_table(&t, &ids) == 0) {
        out = PyByteArray_FromStringAndSize((const char *)t.slots,
                                            (Py_ssize_t)((t.mask + 1) * 8));
    }
    PyMem_Free(t.slots);
    release_strings(&ids);
    return out;
}

static PyObject *
score_columns(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *chunks_obj, *qids_obj, *jstart_obj, *jdocs_obj, *jgrade_obj, *ks_obj, *codes_obj;
    PyObject *level_obj, *values_obj, *status_obj, *lengths_obj, *found_obj, *slots_obj = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOO|O:score_columns", &chunks_obj, &qids_obj,
                          &jstart_obj, &jdocs_obj, &jgrade_obj, &ks_obj, &codes_obj, &level_obj,
                          &values_obj, &status_obj, &lengths_obj, &found_obj, &slots_obj)) {
        return NULL;
    }
    Ctx c;
    memset(&c, 0, sizeof c);
    Run run;
    memset(&run, 0, sizeof run);
    Strings qids, jdocs;
    memset(&qids, 0, sizeof qids);
    memset(&jdocs, 0, sizeof jdocs);
    QueryTable table = {0};
    Py_buffer jstart = {0}, jgrade = {0}, ks = {0}, codes = {0};
    Py_buffer values = {0}, status = {0}, lengths = {0}, found = {0}, slots = {0};
    PyObject *result = NULL;
    int64_t first_dup = -1;

    if (get_run(chunks_obj, &run) < 0 || get_strings(qids_obj, &qids, "query_ids") < 0 ||
        get_strings(jdocs_obj, &jdocs, "judged docs") < 0) {
        goto done;
    }
    int64_t nq = qids.n, nj = jdocs.n;
    if (get_array(jstart_obj, 8, &jstart, nq + 1, "jstart", 0) < 0 ||
        get_array(jgrade_obj, 8, &jgrade, nj, "jgrade", 0) < 0) {
        goto done;
    }
    c.jstart = jstart.buf;
    for (int64_t q = 0; q < nq; q++) {
        if (c.jstart[q] < 0 || c.jstart[q + 1] < c.jstart[q] || c.jstart[q + 1] > nj) {
            PyErr_SetString(PyExc_ValueError, "jstart must rise from 0 to the judgements");
            goto done;
        }
    }
    if (PyObject_GetBuffer(ks_obj, &ks, PyBUF_C_CONTIGUOUS) < 0 ||
        PyObject_GetBuffer(codes_obj, &codes, PyBUF_C_CONTIGUOUS) < 0 ||
        get_options(&c, &ks, &codes, level_obj) < 0) {
        goto done;
    }
    if (get_array(values_obj, 8, &values, nq * c.nv, "values", 1) < 0 ||
        get_array(status_obj, 1, &status, nq, "status", 1) < 0 ||
        get_array(lengths_obj, 8, &lengths, nq, "lengths", 1) < 0 ||
        get_array(found_obj, 8, &found, nq, "found", 1) < 0) {
        goto done;
    }
    c.jdocs = &jdocs;
    c.jgrade = jgrade.buf;
    c.values = values.buf;
    c.status = status.buf;
    c.lengths = lengths.buf;
    c.found = found.buf;
    int64_t most = 1;
    for (int64_t q = 0; q < nq; q++) {
        int64_t n = c.jstart[q + 1] - c.jstart[q];
        most = n > most ? n : most;
    }
    if ((c.tally_mem = PyMem_Malloc(tally_bytes(most, c.o.nk))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    tally_place(&c.t, c.tally_mem, most, c.o.nk);
    if (log2_grow(&c.log2s, 1024) < 0) {
        goto done;
    }
    if (slots_obj != NULL && slots_obj != Py_None) { /* a table built once by query_slots */
        if (PyObject_GetBuffer(slots_obj, &slots, PyBUF_C_CONTIGUOUS) < 0 ||
            given_table(&table, &qids, &slots) < 0) {
            goto done;
        }
    }
    else if (query_table(&table, &qids) < 0) {
        goto done;
    }
    if (score_all(&c, &run, &table, nq, &first_dup) == 0) {
        result = PyLong_FromLongLong((long long)first_dup);
    }

done:
    if (slots.obj == NULL) {
        PyMem_Free(table.slots);
    }
    PyMem_Free(c.slots);
    PyMem_Free(c.hashes);
    PyMem_Free(c.tally_mem);
    PyMem_Free(c.log2s.v);
    release_run(&run);
    release_strings(&qids);
    release_strings(&jdocs);
    Py_buffer *views[] = {&jstart, &jgrade, &ks, &codes, &values, &status, &lengths, &found,
                          &slots};
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
        if (views[i]->obj != NULL) {
            PyBuffer_Release(views[i]);
        }
    }
    return result;
}

PyDoc_STRVAR(score_columns_doc,
             "score_columns(chunks, query_ids, jstart, jdocs, jgrade, ks, codes, level, values, "
             "status, lengths, found, slots=None)\n--\n\n"
             "Compiled ragmeter.metrics.columns.py_score_columns: fills values, status, lengths "
             "and found for the queries with rows (status must be 0 for them: else nothing is "
             "written and -2 returned); returns the qrels position of the first query (by its "
             "first row) whose ranking repeats a doc and is scored, or -1.");

PyDoc_STRVAR(query_slots_doc,
             "query_slots(query_ids)\n--\n\n"
             "The hash table of the qrels' query ids (a bytearray) that score_columns takes as "
             "its last argument, so a run scored in parts hashes them once.");

static PyMethodDef methods[] = {
    {"score_columns", score_columns, METH_VARARGS, score_columns_doc},
    {"query_slots", query_slots, METH_O, query_slots_doc},
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
