/* ragmeter.metrics._ccolumns: the built-in retrieval metrics over a run held as columns.
 *
 * The compiled twin of ragmeter.metrics.columns.py_score_columns (see that module for the
 * contract). A run is three columns split in chunks (the chunks of an Arrow table): the query
 * ids as Arrow string buffers (offsets, 32- or 64-bit, and UTF-8 bytes) or as a dictionary
 * (int32 indices into such strings), the doc ids as string buffers and the scores (float64).
 * No id is interned and no Python object is made per row.
 *
 * The qrels are prepared once per run (prepare: their buffers checked, their query ids hashed
 * into a table) and every call scores one part of the run against them. A call first cuts its
 * rows into segments, runs of rows with one query id (a changed id, or dictionary index, is
 * looked up in the qrels' table; a dictionary entry once per chunk), then sorts the segments by
 * query, so a query's rows need not be contiguous. Each query's rows are gathered into a small
 * buffer, ranked by score descending then doc id descending, bytewise (trec_eval's order, and
 * Python's for UTF-8), and matched with the query's judgements through a per-query hash table
 * of its doc ids (which also finds a repeated doc). Segmenting and scoring run without the GIL,
 * so a caller may decode the next part of a file in another thread meanwhile.
 *
 * Per query the values are those of ragmeter.metrics._kernel.py_score_query on the same
 * ranking, bit for bit: the same IEEE operations in the same order (in _kvalues.h, shared with
 * _ckernel.c).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_kvalues.h"

#define QRELS_CAPSULE "ragmeter.metrics._ccolumns.qrels"

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
load64(const char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline uint64_t
load32(const char *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

/* A 64-bit hash of n bytes, read 8 at a time (the last 1-8 bytes in one word, from two
 * overlapping loads), finished by MurmurHash3's mixer: equal bytes, equal hashes. */
static inline uint64_t
hash_bytes(const char *p, int64_t n)
{
    const uint64_t k = 0x9E3779B97F4A7C15ULL;
    uint64_t h = (uint64_t)n * k, w = 0;
    while (n > 8) {
        h = (h ^ load64(p)) * k;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n >= 4) {
        w = load32(p) | (load32(p + n - 4) << 32);
    }
    else if (n > 0) {
        w = (uint64_t)(unsigned char)p[0] | ((uint64_t)(unsigned char)p[n / 2] << 8) |
            ((uint64_t)(unsigned char)p[n - 1] << 16);
    }
    h ^= w;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 33);
}

static inline int
same_bytes(const char *a, int64_t la, const char *b, int64_t lb)
{
    return la == lb && (la == 0 || memcmp(a, b, (size_t)la) == 0);
}

/* A table of one ranking's doc ids (entry index + 1 by slot, 0 empty), grown on demand. */
typedef struct {
    int64_t *slots;
    uint64_t *hashes;
    int64_t cap, mask;
} DocTable;

/* Room for m docs at most a quarter full, emptied; 0 ok, -1 out of memory (no error set: this
 * runs without the GIL). */
static int
doc_table_reset(DocTable *t, int64_t m)
{
    int64_t cap = 16;
    while (cap < 4 * m) {
        cap <<= 1;
    }
    if (cap > t->cap) {
        int64_t *slots = PyMem_RawRealloc(t->slots, (size_t)cap * sizeof(int64_t));
        if (slots == NULL) {
            return -1;
        }
        t->slots = slots;
        uint64_t *hashes = PyMem_RawRealloc(t->hashes, (size_t)cap * sizeof(uint64_t));
        if (hashes == NULL) {
            return -1;
        }
        t->hashes = hashes;
        t->cap = cap;
    }
    t->mask = cap - 1;
    memset(t->slots, 0, (size_t)(t->mask + 1) * sizeof(int64_t));
    return 0;
}

/* The slot of id (hash h) among the docs e: its own, or the empty one ending its probe. */
static inline int64_t
probe(const DocTable *t, const Entry *e, const char *id, int64_t len, uint64_t h)
{
    int64_t j = (int64_t)(h & (uint64_t)t->mask);
    for (;;) {
        int64_t x = t->slots[j];
        if (x == 0) {
            return j;
        }
        if (t->hashes[j] == h && same_bytes(e[x - 1].id, e[x - 1].len, id, len)) {
            return j;
        }
        j = (j + 1) & t->mask;
    }
}

/* Put the m docs e in the table (see doc_table_reset); *repeated: whether one is there twice.
 * 0 ok, -1 out of memory. */
static int
fill_docs(DocTable *t, const Entry *e, int64_t m, int *repeated)
{
    if (doc_table_reset(t, m) < 0) {
        return -1;
    }
    *repeated = 0;
    for (int64_t i = 0; i < m; i++) {
        uint64_t h = hash_bytes(e[i].id, e[i].len);
        int64_t j = probe(t, e, e[i].id, e[i].len, h);
        if (t->slots[j]) {
            *repeated = 1;
        }
        else {
            t->slots[j] = i + 1;
            t->hashes[j] = h;
        }
    }
    return 0;
}

/* The qrels' query ids as a hash table: position by id. */
typedef struct {
    const Strings *ids;
    int64_t *slots; /* position + 1, 0 empty */
    int64_t mask;
} QueryTable;

/* The qrels, checked and prepared once per run: what the capsule of prepare holds. */
typedef struct {
    Strings ids;
    Strings *jdocs;   /* the judged doc ids, in parts (the chunks of an Arrow column) */
    int64_t *jfirst;  /* the first judgement of each part, and then their count */
    Py_ssize_t jparts;
    Py_buffer jstart, jgrade;
    int64_t nq, nj, most; /* most: the largest judgement count of a query (at least 1) */
    QueryTable table;
} Qrels;

/* What one call shares: the qrels, the options, the outputs, the scratch. */
typedef struct {
    const Qrels *qr;
    const int64_t *jstart; /* query q's judgements: jstart[q] .. jstart[q + 1] */
    const double *jgrade;
    Options o;
    Py_ssize_t nv;    /* values per query */
    double *values;   /* nq * nv */
    int8_t *status;   /* 0 no ranking, 1 scored, 2 not scored (no relevant doc), 3 repeats */
    int64_t *lengths; /* docs in each query's ranking */
    int64_t *found;   /* judged docs in each query's ranking */
    Log2Table log2s;  /* log2(r + 1) */
    DocTable docs;
    Tally t; /* scratch per query, sized to the largest judgement count */
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

/* Rank query q's m rows (in e) and score them: its status, length and values. 0 ok, -1 out
 * of memory (no error set). Needs c->log2s to cover m and the judgement counts already. */
static int
score_one(Ctx *c, int64_t q, Entry *e, int64_t m)
{
    rank_entries(e, m);
    int repeated = 0;
    if (fill_docs(&c->docs, e, m, &repeated) < 0) {
        return -1;
    }
    Tally *t = &c->t;
    tally_start(t, c->o.nk);
    int64_t found = 0;
    const Qrels *qr = c->qr;
    Py_ssize_t part = 0, lo = 0, hi = qr->jparts - 1; /* the part of the first judgement */
    while (lo <= hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (qr->jfirst[mid] <= c->jstart[q]) {
            part = mid;
            lo = mid + 1;
        }
        else {
            hi = mid - 1;
        }
    }
    for (int64_t j = c->jstart[q]; j < c->jstart[q + 1]; j++) {
        while (j >= qr->jfirst[part + 1]) {
            part++;
        }
        int64_t len;
        const char *id = str_at(&qr->jdocs[part], j - qr->jfirst[part], &len);
        /* r: the 1-based rank, 0 when not retrieved */
        int64_t r = m ? c->docs.slots[probe(&c->docs, e, id, len, hash_bytes(id, len))] : 0;
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

/* One Arrow string array from (offsets, data): offsets int32 or int64, n + 1 of them, not
 * decreasing, within the data. */
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
    int bad = 0; /* offsets must not decrease (one branch-free pass) */
    if (s->wide) {
        const int64_t *o = s->offsets.buf;
        for (int64_t i = 0; i < s->n; i++) {
            bad |= o[i + 1] < o[i];
        }
    }
    else {
        const int32_t *o = s->offsets.buf;
        for (int64_t i = 0; i < s->n; i++) {
            bad |= o[i + 1] < o[i];
        }
    }
    int64_t len;
    const char *first = str_at(s, 0, &len);
    const char *last = str_at(s, s->n, &len);
    if (first < (const char *)s->data.buf || last > (const char *)s->data.buf + s->data.len) {
        PyErr_Format(PyExc_ValueError, "%s: offsets beyond the data", name);
        return -1;
    }
    if (bad) {
        PyErr_Format(PyExc_ValueError, "%s: offsets decrease", name);
        return -1;
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

static void
release(Py_buffer *view)
{
    if (view->obj != NULL) {
        PyBuffer_Release(view);
    }
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

/* ------------------------------------------------------------------ the prepared qrels */

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

/* The judged docs: one strings value, or a list of them (parts, in order). */
static int
get_parts(PyObject *obj, Qrels *qr)
{
    int listed = PyList_Check(obj);
    Py_ssize_t n = listed ? PyList_GET_SIZE(obj) : 1;
    qr->jdocs = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Strings));
    qr->jfirst = PyMem_Calloc((size_t)n + 1, sizeof(int64_t));
    if (qr->jdocs == NULL || qr->jfirst == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    qr->jparts = n;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (get_strings(listed ? PyList_GET_ITEM(obj, k) : obj, &qr->jdocs[k], "judged docs") <
            0) {
            return -1;
        }
        qr->jfirst[k + 1] = qr->jfirst[k] + qr->jdocs[k].n;
    }
    return 0;
}

static void
free_qrels(Qrels *qr)
{
    release_strings(&qr->ids);
    for (Py_ssize_t k = 0; qr->jdocs != NULL && k < qr->jparts; k++) {
        release_strings(&qr->jdocs[k]);
    }
    PyMem_Free(qr->jdocs);
    PyMem_Free(qr->jfirst);
    release(&qr->jstart);
    release(&qr->jgrade);
    PyMem_Free(qr->table.slots);
    PyMem_Free(qr);
}

static void
qrels_capsule_free(PyObject *capsule)
{
    Qrels *qr = PyCapsule_GetPointer(capsule, QRELS_CAPSULE);
    if (qr != NULL) {
        free_qrels(qr);
    }
}

static PyObject *
prepare(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *qids_obj, *jstart_obj, *jdocs_obj, *jgrade_obj;
    if (!PyArg_ParseTuple(args, "OOOO:prepare", &qids_obj, &jstart_obj, &jdocs_obj,
                          &jgrade_obj)) {
        return NULL;
    }
    Qrels *qr = PyMem_Calloc(1, sizeof(Qrels));
    if (qr == NULL) {
        return PyErr_NoMemory();
    }
    if (get_strings(qids_obj, &qr->ids, "query_ids") < 0 || get_parts(jdocs_obj, qr) < 0) {
        goto fail;
    }
    qr->nq = qr->ids.n;
    qr->nj = qr->jfirst[qr->jparts];
    if (get_array(jstart_obj, 8, &qr->jstart, qr->nq + 1, "jstart", 0) < 0 ||
        get_array(jgrade_obj, 8, &qr->jgrade, qr->nj, "jgrade", 0) < 0) {
        goto fail;
    }
    const int64_t *jstart = qr->jstart.buf;
    qr->most = 1;
    for (int64_t q = 0; q < qr->nq; q++) {
        if (jstart[q] < 0 || jstart[q + 1] < jstart[q] || jstart[q + 1] > qr->nj) {
            PyErr_SetString(PyExc_ValueError, "jstart must rise from 0 to the judgements");
            goto fail;
        }
        int64_t n = jstart[q + 1] - jstart[q];
        qr->most = n > qr->most ? n : qr->most;
    }
    if (query_table(&qr->table, &qr->ids) < 0) {
        goto fail;
    }
    PyObject *capsule = PyCapsule_New(qr, QRELS_CAPSULE, qrels_capsule_free);
    if (capsule == NULL) {
        goto fail;
    }
    return capsule;
fail:
    free_qrels(qr);
    return NULL;
}

/* ------------------------------------------------------------------ the run */

/* One chunk of the run: its query ids (strings, or int32 indices into strings), doc ids and
 * scores, of one length. */
typedef struct {
    Strings q, d;
    Py_buffer idx, s; /* idx.obj NULL: q holds one id per row */
    int64_t n;
} Chunk;

typedef struct {
    Chunk *c;
    Py_ssize_t n;
} Run;

/* A chunk's query column: (offsets, data), or (int32 indices, (offsets, data)). */
static int
get_queries(PyObject *obj, Chunk *ch)
{
    if (PyTuple_Check(obj) && PyTuple_GET_SIZE(obj) == 2 &&
        PyTuple_Check(PyTuple_GET_ITEM(obj, 1))) {
        if (get_strings(PyTuple_GET_ITEM(obj, 1), &ch->q, "query dictionary") < 0) {
            return -1;
        }
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(obj, 0), &ch->idx,
                               PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
            return -1;
        }
        if (ch->idx.itemsize != 4 || ch->idx.len % 4) {
            PyErr_SetString(PyExc_ValueError, "query indices must be int32");
            return -1;
        }
        ch->n = ch->idx.len / 4;
        const int32_t *x = ch->idx.buf;
        int bad = 0;
        for (int64_t i = 0; i < ch->n; i++) {
            bad |= x[i] < 0 || x[i] >= ch->q.n;
        }
        if (bad) {
            PyErr_SetString(PyExc_ValueError, "query indices beyond the dictionary");
            return -1;
        }
        return 0;
    }
    if (get_strings(obj, &ch->q, "queries") < 0) {
        return -1;
    }
    ch->n = ch->q.n;
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
    run->c = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Chunk));
    if (run->c == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    run->n = n;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyList_GET_ITEM(chunks, k);
        Chunk *ch = &run->c[k];
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_TypeError, "a chunk must be (queries, docs, scores)");
            return -1;
        }
        if (get_queries(PyTuple_GET_ITEM(item, 0), ch) < 0 ||
            get_strings(PyTuple_GET_ITEM(item, 1), &ch->d, "docs") < 0 ||
            get_array(PyTuple_GET_ITEM(item, 2), 8, &ch->s, ch->n, "scores", 0) < 0) {
            return -1;
        }
        if (ch->d.n != ch->n) {
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
        release_strings(&run->c[k].q);
        release_strings(&run->c[k].d);
        release(&run->c[k].idx);
        release(&run->c[k].s);
    }
    PyMem_Free(run->c);
}

/* A run of rows with one query id, within one chunk; row: its first row in the call. */
typedef struct {
    int64_t q, row, chunk, start, count;
} Segment;

typedef struct {
    Segment *v;
    int64_t n, cap;
} Segments;

/* Add a segment; 0 ok, -1 out of memory. */
static int
push(Segments *s, Segment seg)
{
    if (s->n == s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 1024;
        Segment *grown = PyMem_RawRealloc(s->v, (size_t)cap * sizeof(Segment));
        if (grown == NULL) {
            return -1;
        }
        s->v = grown;
        s->cap = cap;
    }
    s->v[s->n++] = seg;
    return 0;
}

/* Each dictionary entry's qrels position (-1: not judged) into map, looked up a block at a
 * time: the table slots, then the ids they hold, fetched ahead (a million queries' table does
 * not fit in a cache: one lookup alone would wait for memory twice). */
static void
look_up_all(const Strings *dict, const QueryTable *t, int64_t *map)
{
    enum { BLOCK = 64 };
    uint64_t h[BLOCK];
    for (int64_t lo = 0; lo < dict->n; lo += BLOCK) {
        int64_t n = dict->n - lo < BLOCK ? dict->n - lo : BLOCK, len;
        for (int64_t i = 0; i < n; i++) {
            const char *id = str_at(dict, lo + i, &len);
            h[i] = hash_bytes(id, len);
            __builtin_prefetch(&t->slots[h[i] & (uint64_t)t->mask]);
        }
        for (int64_t i = 0; i < n; i++) {
            int64_t x = t->slots[h[i] & (uint64_t)t->mask];
            if (x) {
                __builtin_prefetch((const char *)t->ids->offsets.buf +
                                   (x - 1) * t->ids->offsets.itemsize);
            }
        }
        for (int64_t i = 0; i < n; i++) {
            const char *id = str_at(dict, lo + i, &len);
            map[lo + i] = find_query(t, id, len);
        }
    }
}

/* The segments of a chunk whose query ids are a dictionary's indices: an index is looked up
 * once (map: its qrels position, -1 not judged, -2 not looked up yet; all at once when the
 * dictionary is no longer than the chunk, else on first use). */
static int
dictionary_segments(const Chunk *ch, const QueryTable *t, int64_t k, int64_t row, Segments *s)
{
    int64_t *map = PyMem_RawMalloc((size_t)(ch->q.n ? ch->q.n : 1) * sizeof(int64_t));
    if (map == NULL) {
        return -1;
    }
    if (ch->q.n <= ch->n) {
        look_up_all(&ch->q, t, map);
    }
    else {
        for (int64_t i = 0; i < ch->q.n; i++) {
            map[i] = -2;
        }
    }
    const int32_t *x = ch->idx.buf;
    int32_t prev = -1;
    int64_t cur = -1;
    for (int64_t i = 0; i < ch->n; i++) {
        if (x[i] == prev) {
            if (cur >= 0) {
                s->v[s->n - 1].count++;
            }
            continue;
        }
        prev = x[i];
        if ((cur = map[prev]) == -2) {
            int64_t len;
            const char *id = str_at(&ch->q, prev, &len);
            cur = map[prev] = find_query(t, id, len);
        }
        if (cur >= 0 && push(s, (Segment){cur, row + i, k, i, 1}) < 0) {
            PyMem_RawFree(map);
            return -1;
        }
    }
    PyMem_RawFree(map);
    return 0;
}

/* The segments of a chunk of query id strings: an id that differs from the row before it is
 * looked up. */
static int
string_segments(const Chunk *ch, const QueryTable *t, int64_t k, int64_t row, Segments *s)
{
    const char *prev = NULL;
    int64_t prev_len = -1, cur = -1;
    for (int64_t i = 0; i < ch->n; i++) {
        int64_t len;
        const char *id = str_at(&ch->q, i, &len);
        if (prev != NULL && same_bytes(prev, prev_len, id, len)) {
            if (cur >= 0) {
                s->v[s->n - 1].count++;
            }
            continue;
        }
        prev = id;
        prev_len = len;
        cur = find_query(t, id, len);
        if (cur >= 0 && push(s, (Segment){cur, row + i, k, i, 1}) < 0) {
            return -1;
        }
    }
    return 0;
}

static int
cmp_segment(const void *pa, const void *pb)
{
    const Segment *a = pa, *b = pb;
    if (a->q != b->q) {
        return a->q < b->q ? -1 : 1;
    }
    return (a->row > b->row) - (a->row < b->row);
}

/* Every segment of the run with a judged query, sorted by query then row; 0 ok, -1 out of
 * memory. */
static int
segments(const Run *run, const QueryTable *t, Segments *s)
{
    int64_t row = 0;
    for (Py_ssize_t k = 0; k < run->n; k++) {
        const Chunk *ch = &run->c[k];
        int rc = ch->idx.obj != NULL ? dictionary_segments(ch, t, k, row, s)
                                     : string_segments(ch, t, k, row, s);
        if (rc < 0) {
            return -1;
        }
        row += ch->n;
    }
    for (int64_t i = 1; i < s->n; i++) {
        if (cmp_segment(&s->v[i - 1], &s->v[i]) > 0) {
            qsort(s->v, (size_t)s->n, sizeof(Segment), cmp_segment);
            break;
        }
    }
    return 0;
}

/* Score every query of the segments (sorted by query); *first_dup: the query whose ranking
 * repeats a doc and is scored, the first by its first row, or -1. 0 ok, -1 out of memory. */
static int
score_segments(Ctx *c, const Run *run, const Segments *s, Entry *entries, int64_t *first_dup)
{
    int64_t dup_row = -1;
    *first_dup = -1;
    for (int64_t a = 0, b; a < s->n; a = b) {
        int64_t q = s->v[a].q, m = 0;
        for (b = a; b < s->n && s->v[b].q == q; b++) {
            const Segment *g = &s->v[b];
            const Chunk *ch = &run->c[g->chunk];
            const double *scores = ch->s.buf;
            for (int64_t i = g->start; i < g->start + g->count; i++, m++) {
                entries[m].score = scores[i];
                entries[m].id = str_at(&ch->d, i, &entries[m].len);
            }
        }
        if (score_one(c, q, entries, m) < 0) {
            return -1;
        }
        if (c->status[q] == 3 && (dup_row < 0 || s->v[a].row < dup_row)) {
            *first_dup = q;
            dup_row = s->v[a].row;
        }
    }
    return 0;
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

/* Segment the run and score its queries, the GIL released but to size the log2 table;
 * the call's result (-2: a query was scored by an earlier call), or -3 (error set). */
static int64_t
score_run(Ctx *c, const Run *run)
{
    Segments s = {0};
    Entry *entries = NULL;
    int64_t result = -3, most = 0, first_dup = -1;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = segments(run, &c->qr->table, &s);
    for (int64_t a = 0, b; rc == 0 && a < s.n; a = b) { /* nothing scored before; sizes */
        int64_t q = s.v[a].q, m = 0;
        for (b = a; b < s.n && s.v[b].q == q; b++) {
            m += s.v[b].count;
        }
        if (c->status[q] != 0) {
            rc = 1;
        }
        most = m > most ? m : most;
    }
    if (rc == 0 && (entries = PyMem_RawMalloc((size_t)(most ? most : 1) * sizeof(Entry))) == NULL) {
        rc = -1;
    }
    Py_END_ALLOW_THREADS
    if (rc == 1) {
        result = -2;
        goto done;
    }
    if (rc < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (log2_grow(&c->log2s, most > c->qr->most ? most : c->qr->most) < 0) {
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = score_segments(c, run, &s, entries, &first_dup);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = first_dup;
done:
    PyMem_RawFree(s.v);
    PyMem_RawFree(entries);
    return result;
}

static PyObject *
score_columns(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *chunks_obj, *qrels_obj, *ks_obj, *codes_obj;
    PyObject *level_obj, *values_obj, *status_obj, *lengths_obj, *found_obj;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO:score_columns", &chunks_obj, &qrels_obj, &ks_obj,
                          &codes_obj, &level_obj, &values_obj, &status_obj, &lengths_obj,
                          &found_obj)) {
        return NULL;
    }
    if (!PyCapsule_IsValid(qrels_obj, QRELS_CAPSULE)) {
        PyErr_SetString(PyExc_TypeError, "qrels: expected the result of prepare()");
        return NULL;
    }
    const Qrels *qr = PyCapsule_GetPointer(qrels_obj, QRELS_CAPSULE);
    Ctx c;
    memset(&c, 0, sizeof c);
    c.qr = qr;
    c.jstart = qr->jstart.buf;
    c.jgrade = qr->jgrade.buf;
    Run run;
    memset(&run, 0, sizeof run);
    Py_buffer ks = {0}, codes = {0};
    Py_buffer values = {0}, status = {0}, lengths = {0}, found = {0};
    PyObject *result = NULL;
    int64_t nq = qr->nq;

    if (get_run(chunks_obj, &run) < 0) {
        goto done;
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
    c.values = values.buf;
    c.status = status.buf;
    c.lengths = lengths.buf;
    c.found = found.buf;
    if ((c.tally_mem = PyMem_Malloc(tally_bytes(qr->most, c.o.nk))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    tally_place(&c.t, c.tally_mem, qr->most, c.o.nk);
    int64_t first_dup = score_run(&c, &run);
    if (first_dup != -3) {
        result = PyLong_FromLongLong((long long)first_dup);
    }

done:
    PyMem_RawFree(c.docs.slots);
    PyMem_RawFree(c.docs.hashes);
    PyMem_Free(c.tally_mem);
    PyMem_Free(c.log2s.v);
    release_run(&run);
    Py_buffer *views[] = {&ks, &codes, &values, &status, &lengths, &found};
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
        release(views[i]);
    }
    return result;
}

/* ------------------------------------------------------------------ repeats within blocks */

/* Whether some block of rows holds one string twice: 1 yes, 0 no, -1 out of memory. */
static int
block_repeats(const Strings *parts, Py_ssize_t n_parts, const int64_t *heads, int64_t n_heads,
              int64_t total)
{
    DocTable t = {0};
    Entry *e = NULL;
    int64_t cap = 0, block = 0, m = 0, row = 0;
    int found = 0, rc = 0;
    for (Py_ssize_t k = 0; k < n_parts && !found && rc == 0; k++) {
        for (int64_t i = 0; i < parts[k].n; i++, row++) {
            if (m == cap) {
                cap = cap ? 2 * cap : 256;
                Entry *grown = PyMem_RawRealloc(e, (size_t)cap * sizeof(Entry));
                if (grown == NULL) {
                    rc = -1;
                    break;
                }
                e = grown;
            }
            e[m].id = str_at(&parts[k], i, &e[m].len);
            m++;
            int64_t end = block + 1 < n_heads ? heads[block + 1] : total;
            if (row + 1 == end) { /* the block's last row */
                if (m > 1 && (rc = fill_docs(&t, e, m, &found)) < 0) {
                    break;
                }
                if (found) {
                    break;
                }
                block++;
                m = 0;
            }
        }
    }
    PyMem_RawFree(t.slots);
    PyMem_RawFree(t.hashes);
    PyMem_RawFree(e);
    return rc < 0 ? -1 : found;
}

static PyObject *
repeats_within(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *parts_obj, *heads_obj;
    if (!PyArg_ParseTuple(args, "OO:repeats_within", &parts_obj, &heads_obj)) {
        return NULL;
    }
    if (!PyList_Check(parts_obj)) {
        PyErr_SetString(PyExc_TypeError, "parts must be a list of (offsets, data)");
        return NULL;
    }
    Py_ssize_t n_parts = PyList_GET_SIZE(parts_obj);
    Strings *parts = PyMem_Calloc((size_t)(n_parts ? n_parts : 1), sizeof(Strings));
    Py_buffer heads = {0};
    PyObject *result = NULL;
    if (parts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t total = 0;
    for (Py_ssize_t k = 0; k < n_parts; k++) {
        if (get_strings(PyList_GET_ITEM(parts_obj, k), &parts[k], "strings") < 0) {
            goto done;
        }
        total += parts[k].n;
    }
    if (PyObject_GetBuffer(heads_obj, &heads, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        goto done;
    }
    const int64_t *h = heads.buf;
    int64_t n_heads = heads.len / 8;
    int bad = heads.itemsize != 8 || heads.len % 8 || (total > 0 && (n_heads == 0 || h[0] != 0));
    for (int64_t i = 0; !bad && i < n_heads; i++) {
        bad = h[i] < 0 || h[i] >= total || (i && h[i] <= h[i - 1]);
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError,
                        "heads must be int64 rows, ascending from 0, within the strings");
        goto done;
    }
    int found;
    Py_BEGIN_ALLOW_THREADS
    found = block_repeats(parts, n_parts, h, n_heads, total);
    Py_END_ALLOW_THREADS
    if (found < 0) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyBool_FromLong(found);
done:
    for (Py_ssize_t k = 0; parts != NULL && k < n_parts; k++) {
        release_strings(&parts[k]);
    }
    PyMem_Free(parts);
    release(&heads);
    return result;
}

PyDoc_STRVAR(score_columns_doc,
             "score_columns(chunks, qrels, ks, codes, level, values, status, lengths, found)\n"
             "--\n\n"
             "Compiled ragmeter.metrics.columns.py_score_columns against qrels from prepare: "
             "fills values, status, lengths and found for the queries with rows (status must be "
             "0 for them: else nothing is written and -2 returned); returns the qrels position "
             "of the first query (by its first row) whose ranking repeats a doc and is scored, "
             "or -1. A chunk's queries are (offsets, data) or (int32 indices, (offsets, data)).");

PyDoc_STRVAR(prepare_doc,
             "prepare(query_ids, jstart, jdocs, jgrade)\n--\n\n"
             "The qrels checked and their query ids hashed, once per run: the object "
             "score_columns takes (it keeps the buffers it was given). jdocs is one (offsets, "
             "data) or a list of them, the chunks of one column.");

PyDoc_STRVAR(repeats_within_doc,
             "repeats_within(parts, heads)\n--\n\n"
             "Whether a string column (parts: the (offsets, data) of its chunks, in order) holds "
             "one value twice within a block of rows; the blocks start at the rows heads (int64, "
             "ascending from 0). Exact: ids are compared byte for byte.");

static PyMethodDef methods[] = {
    {"score_columns", score_columns, METH_VARARGS, score_columns_doc},
    {"prepare", prepare, METH_VARARGS, prepare_doc},
    {"repeats_within", repeats_within, METH_VARARGS, repeats_within_doc},
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
