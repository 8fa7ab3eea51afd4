/* ragmeter.io._ctrec: TREC run and qrels lines parsed at C speed, a block of bytes at a time.
 *
 * The compiled twin of the line rules of ragmeter.io.trec (the pure-Python reader stays the
 * reference): a file is split into lines on b"\n" only; the first line loses a UTF-8 BOM, and
 * then one more (the raw reader drops one before decoding, the line reader one after); a line
 * is split on whitespace exactly as str.split() splits it; an empty line and one whose first
 * field starts with "#" are skipped. A line made of ASCII bytes is split here (ASCII whitespace
 * for str.split() is \t \n \v \f \r \x1c-\x1f and space); a line holding any other byte is
 * decoded as strict UTF-8 and split by str.split() itself, so Unicode whitespace and ids behave
 * as in Python by construction. Numbers are Python's: a score is float(token) (a short plain
 * decimal is converted here with one correctly rounded IEEE operation, the rest by
 * PyOS_string_to_double or float() itself: the same correctly rounded double), a grade
 * int(token), else an integral float(token).
 *
 * These parsers never explain a problem: on anything the Python reader would refuse (too few or
 * too many fields, a score that is not a finite number, a grade that is not an integer or is
 * beyond 2**53, a doc listed twice for a query, a doc judged twice with two grades, a line that
 * is not UTF-8) feed()/finish() return None and the parser stops; the caller then reads the
 * file with the Python reader, which raises the error with its file, line and wording.
 *
 * RunParser(*, tuples=False): feed(block) -> list of (query_id, doc_ids, doc_tuple, scores,
 * first_line), one per maximal run of consecutive lines of one query, completed so far (a
 * query still being read is kept across blocks); finish() -> the last one. Each piece's docs
 * are distinct and in trec_eval's order (score descending, ties by doc id descending, as
 * sorted() compares str): a list, and the same strs in a tuple (untracked by the cyclic
 * collector, as CPython untracks a tuple of strs) when `tuples` is true, else None; its scores
 * an array('d') aligned with them.
 *
 * QrelsParser: feed(block) -> True (False: irregular); finish() -> ({query_id: {doc_id:
 * grade}}, repeats) in first-seen order, an identical repeat counted and kept once, or None.
 */
#include "_ctrec.h"

static PyObject *array_of_one_zero = NULL; /* array('d', [0.0]): repeated to make score arrays */

/* ------------------------------------------------------------------ run */

typedef struct {
    double score;
    PyObject *doc;
} Scored;

typedef struct {
    PyObject_HEAD Lines lines;
    PyObject *out;      /* list of finished pieces, returned by the next feed() */
    PyObject *qid;      /* the query being read, or NULL */
    long long first;    /* the line its piece started on */
    Scored *docs;       /* its docs (owned references) and scores, in file order */
    Py_ssize_t n, cap;
    uint32_t *slots;    /* an open-addressing table of doc positions + 1, to find repeats */
    Py_ssize_t n_slots;
    int tuples;         /* give each piece a tuple of its docs too */
} RunParser;

static uint64_t
hash_bytes(const unsigned char *p, size_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n, w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

/* Whether two docs of the piece are the same str (equal strs have the same kind and data). */
static int
has_repeat(RunParser *self)
{
    Py_ssize_t n = self->n, size = 16;
    while (size < 2 * n) size *= 2;
    if (size > self->n_slots) {
        uint32_t *slots = PyMem_Realloc(self->slots, (size_t)size * sizeof(uint32_t));
        if (slots == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
        self->slots = slots;
        self->n_slots = size;
    }
    if (n >= (Py_ssize_t)UINT32_MAX) return IRREGULAR; /* 4 billion docs in one query: let Python */
    memset(self->slots, 0, (size_t)size * sizeof(uint32_t));
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *doc = self->docs[i].doc;
        int kind = PyUnicode_KIND(doc);
        size_t bytes = (size_t)PyUnicode_GET_LENGTH(doc) * (size_t)kind;
        const void *data = PyUnicode_DATA(doc);
        size_t at = (size_t)(hash_bytes(data, bytes) ^ (uint64_t)kind) & (size_t)(size - 1);
        for (;;) {
            uint32_t slot = self->slots[at];
            if (slot == 0) {
                self->slots[at] = (uint32_t)(i + 1);
                break;
            }
            PyObject *other = self->docs[slot - 1].doc;
            if (PyUnicode_KIND(other) == kind &&
                PyUnicode_GET_LENGTH(other) == PyUnicode_GET_LENGTH(doc) &&
                memcmp(PyUnicode_DATA(other), data, bytes) == 0)
                return IRREGULAR;
            at = (at + 1) & (size_t)(size - 1);
        }
    }
    return OK;
}

/* sorted(..., reverse=True) of (score, doc) pairs: score descending, then doc descending. */
static int
descending(const void *a, const void *b)
{
    const Scored *x = a, *y = b;
    if (x->score > y->score) return -1;
    if (x->score < y->score) return 1;
    return -PyUnicode_Compare(x->doc, y->doc);
}

/* The piece being read, checked and put in trec_eval's order, appended to self->out. */
static int
finish_piece(RunParser *self)
{
    Py_ssize_t n = self->n;
    if (self->qid == NULL) return OK;
    int r = has_repeat(self);
    if (r != OK) return r;
    for (Py_ssize_t i = 1; i < n; i++) {
        if (!(self->docs[i - 1].score > self->docs[i].score)) {
            qsort(self->docs, (size_t)n, sizeof(Scored), descending);
            break;
        }
    }
    PyObject *docs = PyList_New(n);
    PyObject *read = docs && self->tuples ? PyTuple_New(n) : Py_NewRef(Py_None);
    PyObject *scores = read ? PySequence_Repeat(array_of_one_zero, n) : NULL;
    PyObject *first = scores ? PyLong_FromLongLong(self->first) : NULL;
    Py_buffer view;
    if (first == NULL || PyObject_GetBuffer(scores, &view, PyBUF_WRITABLE) < 0) {
        Py_XDECREF(docs);
        Py_XDECREF(read);
        Py_XDECREF(scores);
        Py_XDECREF(first);
        return FAILED;
    }
    double *values = view.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *doc = self->docs[i].doc;
        PyList_SET_ITEM(docs, i, doc); /* the reference moves to the list */
        if (read != Py_None) PyTuple_SET_ITEM(read, i, Py_NewRef(doc));
        values[i] = self->docs[i].score;
    }
    PyBuffer_Release(&view);
    /* a tuple of strs can hold no cycle: CPython's collector would untrack it on its first
     * pass (after visiting every item); it is untracked now instead */
    if (read != Py_None) PyObject_GC_UnTrack(read);
    self->n = 0;
    PyObject *piece = PyTuple_Pack(5, self->qid, docs, read, scores, first);
    Py_DECREF(docs);
    Py_DECREF(read);
    Py_DECREF(scores);
    Py_DECREF(first);
    Py_CLEAR(self->qid);
    if (piece == NULL) return FAILED;
    r = PyList_Append(self->out, piece);
    Py_DECREF(piece);
    return r < 0 ? FAILED : OK;
}

/* Add (qid, doc, score) read on `lineno`; steals the references to qid (may be NULL: the
 * same query as before) and doc. */
static int
add_doc(RunParser *self, PyObject *qid, PyObject *doc, double score, long long lineno)
{
    if (qid != NULL) {
        int r = finish_piece(self);
        if (r != OK) {
            Py_DECREF(qid);
            Py_DECREF(doc);
            return r;
        }
        self->qid = qid;
        self->first = lineno;
    }
    if (self->n == self->cap) {
        Py_ssize_t cap = self->cap * 2 + 64;
        Scored *docs = PyMem_Realloc(self->docs, (size_t)cap * sizeof(Scored));
        if (docs == NULL) {
            Py_DECREF(doc);
            PyErr_NoMemory();
            return FAILED;
        }
        self->docs = docs;
        self->cap = cap;
    }
    self->docs[self->n].doc = doc;
    self->docs[self->n].score = score;
    self->n++;
    return OK;
}

/* A run line with a byte >= 0x80: decoded and split by str.split(). */
static int
run_line_unicode(RunParser *self, const char *p, const char *e, long long lineno)
{
    PyObject *fields = unicode_fields(p, e);
    if (fields == NULL) return PyErr_Occurred() ? FAILED : IRREGULAR;
    Py_ssize_t n = PyList_GET_SIZE(fields);
    int r = OK;
    double score;
    if (n == 0 || is_comment_str(PyList_GET_ITEM(fields, 0))) r = OK;
    else if (n < 5 || !str_float(PyList_GET_ITEM(fields, 4), &score) || !isfinite(score))
        r = IRREGULAR;
    else {
        PyObject *qid = PyList_GET_ITEM(fields, 0), *doc = PyList_GET_ITEM(fields, 2);
        int same = self->qid != NULL && PyUnicode_Compare(self->qid, qid) == 0;
        Py_INCREF(doc);
        if (!same) Py_INCREF(qid);
        r = add_doc(self, same ? NULL : qid, doc, score, lineno);
    }
    Py_DECREF(fields);
    return r;
}

static int
run_line(void *me, const char *p, const char *e, long long lineno, int ascii)
{
    RunParser *self = me;
    if (!ascii) return run_line_unicode(self, p, e, lineno);
    Token f[5];
    int n = ascii_fields(p, e, f, 5);
    if (n == 0 || f[0].p[0] == '#') return OK;
    double score;
    if (n < 5 || !ascii_float(f[4].p, f[4].n, &score) || !isfinite(score)) return IRREGULAR;
    PyObject *qid = NULL;
    if (self->qid == NULL || !str_is(self->qid, f[0].p, f[0].n)) {
        qid = ascii_str(f[0].p, f[0].n);
        if (qid == NULL) return FAILED;
    }
    PyObject *doc = ascii_str(f[2].p, f[2].n);
    if (doc == NULL) {
        Py_XDECREF(qid);
        return FAILED;
    }
    return add_doc(self, qid, doc, score, lineno);
}

static void
run_clear(RunParser *self)
{
    for (Py_ssize_t i = 0; i < self->n; i++) Py_DECREF(self->docs[i].doc);
    self->n = 0;
    Py_CLEAR(self->qid);
}

/* The finished pieces so far, or None when the file is irregular (or was). */
static PyObject *
run_result(RunParser *self, int r)
{
    if (r == FAILED) {
        self->lines.failed = 1;
        run_clear(self);
        return NULL;
    }
    if (r == IRREGULAR || self->lines.failed) {
        self->lines.failed = 1;
        run_clear(self);
        Py_SETREF(self->out, PyList_New(0));
        if (self->out == NULL) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *done = self->out;
    self->out = PyList_New(0);
    if (self->out == NULL) {
        self->out = done;
        return NULL;
    }
    return done;
}

static PyObject *
run_feed(RunParser *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int r = self->lines.failed ? IRREGULAR
                               : feed_lines(&self->lines, self, run_line, view.buf, view.len, 0);
    PyBuffer_Release(&view);
    return run_result(self, r);
}

static PyObject *
run_finish(RunParser *self, PyObject *Py_UNUSED(ignored))
{
    int r = self->lines.failed ? IRREGULAR : feed_lines(&self->lines, self, run_line, "", 0, 1);
    if (r == OK) r = finish_piece(self);
    return run_result(self, r);
}

static int
run_init(RunParser *self, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"tuples", NULL};
    int tuples = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$p:RunParser", keywords, &tuples)) return -1;
    self->tuples = tuples;
    run_clear(self);
    self->lines.len = 0;
    self->lines.lineno = 0;
    self->lines.failed = 0;
    Py_XSETREF(self->out, PyList_New(0));
    return self->out == NULL ? -1 : 0;
}

static void
run_dealloc(RunParser *self)
{
    run_clear(self);
    Py_XDECREF(self->out);
    PyMem_Free(self->docs);
    PyMem_Free(self->slots);
    PyMem_Free(self->lines.buf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef run_methods[] = {
    {"feed", (PyCFunction)run_feed, METH_O,
     "feed(block) -> the pieces completed by this block's lines, or None (irregular)"},
    {"finish", (PyCFunction)run_finish, METH_NOARGS,
     "finish() -> the last pieces (the file's last line need not end in a newline), or None"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RunParserType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ragmeter.io._ctrec.RunParser",
    .tp_basicsize = sizeof(RunParser),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A TREC run read a block of bytes at a time (see the module's docstring).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)run_init,
    .tp_dealloc = (destructor)run_dealloc,
    .tp_methods = run_methods,
};

/* ------------------------------------------------------------------ module */

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ragmeter.io._ctrec",
    .m_doc = "TREC run and qrels lines parsed at C speed (the compiled twin of ragmeter.io.trec's "
             "line rules; anything irregular is left to the Python reader).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__ctrec(void)
{
    if (PyType_Ready(&RunParserType) < 0 || PyType_Ready(&QrelsParserType) < 0) return NULL;
    if (array_of_one_zero == NULL) {
        PyObject *array = PyImport_ImportModule("array");
        if (array == NULL) return NULL;
        array_of_one_zero = PyObject_CallMethod(array, "array", "s[d]", "d", 0.0);
        Py_DECREF(array);
        if (array_of_one_zero == NULL) return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    if (PyModule_AddObjectRef(module, "RunParser", (PyObject *)&RunParserType) < 0 ||
        PyModule_AddObjectRef(module, "QrelsParser", (PyObject *)&QrelsParserType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
