/* ragmeter.metrics._ckernel.RunLoop: a whole run's (query id, ranking) pairs scored in one C loop.
 *
 * The scoring loop of ragmeter.evaluation.scoring keeps, for every scored query, its qrels
 * position, its id and its kernel values, and counts what the judged@k
 * report needs. RunLoop does all of it in C for the pairs it recognises, straight into the
 * loop's own lists and array (no per-query Python code, no list of values per query):
 *
 *   loop = RunLoop(index, judgements, ks, codes, level, cut, jpos, examples,
 *                  run_ids, ranked_at, positions, ids, values)
 *   pair = loop.feed(iterator, need_judged)   # the first pair it leaves to Python, or None
 *   loop.counts                                # (count, docs, unjudged, shown, short)
 *
 * index maps a judged query id to its qrels position; judgements[position] are its
 * judgements. A pair the loop recognises is a 2-tuple of an exact str query id and an exact
 * list or tuple ranking of exact str doc ids, whose query is unjudged (ignored) or has an
 * exact dict of judgements with exact int, float or bool grades within 2**53 and no repeated
 * doc when it is scored. For such a pair the loop appends the position to ranked_at and, when
 * the query has a relevant judgement, the position to positions, the id to ids and all its
 * values (ragmeter.metrics._kernel.result_keys order, judged@k last) to values (an
 * array('d'), from which the caller reads each row: ragmeter.report.ColumnRows), and counts, at cut-off cut (values[jpos] is
 * judged@cut), the docs in the ranking's top, the unjudged ones among them, the rankings that
 * hold a doc and those with an unjudged doc in their top. Every other pair (an id of another
 * type, a repeated doc, a bad grade, a ranking that is not a list ...) is handed back before
 * anything is kept for it, for the Python loop to score or to refuse with its usual message;
 * so are the pairs seen while run_ids holds fewer than examples ids and, when need_judged is
 * true, the judged queries' non-empty rankings (the Python loop notes those). The values are
 * ck_score_ranking's, so the same floats as the Python kernel's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_ckernel.h"

#define STAGE 4096 /* values kept in C before they go to the array, at most */

typedef struct {
    PyObject_HEAD
    PyObject *index;      /* dict: judged query id -> qrels position */
    PyObject *judgements; /* list: each position's judgements */
    PyObject *run_ids, *ranked_at, *positions, *ids;
    PyObject *frombytes; /* values.frombytes */
    Options o;
    int64_t *ints; /* ks then codes */
    int want_judged, busy;
    Py_ssize_t nvals, cut, jpos, examples;
    long long count, docs, unjudged, shown, short_;
    Scratch s;
    double *stage;
    Py_ssize_t staged;
} RunLoop;

static void
loop_dealloc(RunLoop *self)
{
    Py_XDECREF(self->index);
    Py_XDECREF(self->judgements);
    Py_XDECREF(self->run_ids);
    Py_XDECREF(self->ranked_at);
    Py_XDECREF(self->positions);
    Py_XDECREF(self->ids);
    Py_XDECREF(self->frombytes);
    PyMem_Free(self->ints);
    PyMem_Free(self->stage);
    ck_scratch_free(&self->s);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The options from ks, codes and level; 0, or -1 with ValueError set. */
static int
loop_options(RunLoop *self, PyObject *ks, PyObject *codes, PyObject *level)
{
    Options *o = &self->o;
    if (!(PyList_CheckExact(ks) || PyTuple_CheckExact(ks)) ||
        !(PyList_CheckExact(codes) || PyTuple_CheckExact(codes))) {
        PyErr_SetString(PyExc_ValueError, "RunLoop: ks and codes must be lists or tuples");
        return -1;
    }
    o->nk = PySequence_Fast_GET_SIZE(ks);
    o->nc = PySequence_Fast_GET_SIZE(codes);
    self->ints = PyMem_Malloc((size_t)(o->nk + o->nc + 1) * sizeof(int64_t));
    if (self->ints == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (o->nk == 0 || !ck_parse_ints(ks, self->ints, 1, EXACT_LIMIT, 1) ||
        !ck_parse_ints(codes, self->ints + o->nk, 0, N_CODES - 1, 0)) {
        PyErr_SetString(PyExc_ValueError,
                        "RunLoop: ks must be ascending ints >= 1, codes kernel codes");
        return -1;
    }
    o->ks = self->ints;
    o->codes = self->ints + o->nk;
    for (Py_ssize_t ci = 0; ci < o->nc; ci++) {
        self->want_judged |= o->codes[ci] == JUDGED;
        self->nvals += o->nk + (o->codes[ci] == MRR || o->codes[ci] == MAP);
    }
    if (level != Py_None) {
        if (PyBool_Check(level) || !ck_exact_double(level, &o->level)) {
            PyErr_SetString(PyExc_ValueError,
                            "RunLoop: level must be None, an exact float or an exact int");
            return -1;
        }
        o->has_level = 1;
    }
    return 0;
}

static PyObject *
loop_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *index, *judgements, *ks, *codes, *level, *run_ids, *ranked_at, *positions, *ids;
    PyObject *values;
    Py_ssize_t cut, jpos, examples;
    if ((kwargs != NULL && PyDict_GET_SIZE(kwargs)) ||
        !PyArg_ParseTuple(args, "O!O!OOOnnnO!O!O!O!O:RunLoop", &PyDict_Type, &index,
                          &PyList_Type, &judgements, &ks, &codes, &level, &cut, &jpos,
                          &examples, &PyList_Type, &run_ids, &PyList_Type, &ranked_at,
                          &PyList_Type, &positions, &PyList_Type, &ids, &values)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "RunLoop takes positional arguments only");
        }
        return NULL;
    }
    RunLoop *self = (RunLoop *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->index = Py_NewRef(index);
    self->judgements = Py_NewRef(judgements);
    self->run_ids = Py_NewRef(run_ids);
    self->ranked_at = Py_NewRef(ranked_at);
    self->positions = Py_NewRef(positions);
    self->ids = Py_NewRef(ids);
    self->cut = cut;
    self->jpos = jpos;
    self->examples = examples;
    if (loop_options(self, ks, codes, level) < 0) {
        goto error;
    }
    if (cut < 1 || jpos < 0 || jpos >= self->nvals) {
        PyErr_SetString(PyExc_ValueError, "RunLoop: cut or jpos do not fit the codes");
        goto error;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(values, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        goto error;
    }
    int doubles = view.format != NULL && strcmp(view.format, "d") == 0;
    PyBuffer_Release(&view);
    if (!doubles) {
        PyErr_SetString(PyExc_TypeError, "RunLoop: values must be an array('d')");
        goto error;
    }
    if ((self->frombytes = PyObject_GetAttrString(values, "frombytes")) == NULL) {
        goto error;
    }
    if ((self->stage = PyMem_Malloc(STAGE * sizeof(double))) == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    return (PyObject *)self;
error:
    Py_DECREF(self);
    return NULL;
}

/* Send the staged values to the array; 0, or -1 (exception set). */
static int
flush(RunLoop *self)
{
    if (self->staged == 0) {
        return 0;
    }
    PyObject *view = PyMemoryView_FromMemory((char *)self->stage,
                                             self->staged * (Py_ssize_t)sizeof(double), PyBUF_READ);
    if (view == NULL) {
        return -1;
    }
    PyObject *done = PyObject_CallOneArg(self->frombytes, view);
    Py_DECREF(view);
    if (done == NULL) {
        return -1;
    }
    Py_DECREF(done);
    self->staged = 0;
    return 0;
}

/* Keep a scored query (qrels position `at`, id qid, nv values in out, a ranking of n). */
static int
keep(RunLoop *self, PyObject *at, PyObject *qid, const double *out, Py_ssize_t nv, Py_ssize_t n)
{
    self->count++;
    if (n) { /* judged@cut = judged / min(cut, n): the unjudged count, exactly */
        Py_ssize_t top = n > self->cut ? self->cut : n;
        Py_ssize_t missed = top - (Py_ssize_t)nearbyint(out[self->jpos] * (double)top);
        self->docs += top;
        self->shown++;
        if (missed) {
            self->unjudged += missed;
            self->short_++;
        }
    }
    if (PyList_Append(self->positions, at) < 0 || PyList_Append(self->ids, qid) < 0) {
        return -1;
    }
    if (self->staged + nv > STAGE && flush(self) < 0) {
        return -1;
    }
    memcpy(self->stage + self->staged, out, (size_t)nv * sizeof(double));
    self->staged += nv;
    return 0;
}

/* One pair: 1 done (kept or ignored), 0 left to Python (nothing kept), -1 error. */
static int
take(RunLoop *self, PyObject *item, int need_judged)
{
    if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2) {
        return 0;
    }
    PyObject *qid = PyTuple_GET_ITEM(item, 0), *raw = PyTuple_GET_ITEM(item, 1);
    if (!PyUnicode_CheckExact(qid) || PyList_GET_SIZE(self->run_ids) < self->examples) {
        return 0;
    }
    PyObject *at = PyDict_GetItemWithError(self->index, qid);
    if (at == NULL) {
        return PyErr_Occurred() ? -1 : 1; /* a ranking for an unjudged query is ignored */
    }
    if (!(PyList_CheckExact(raw) || PyTuple_CheckExact(raw))) {
        return 0;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(raw);
    if (need_judged && n > 0) {
        return 0;
    }
    Py_INCREF(at);
    Py_ssize_t position = PyLong_CheckExact(at) ? PyLong_AsSsize_t(at) : -1;
    PyObject *judgements = NULL;
    if (position >= 0 && position < PyList_GET_SIZE(self->judgements)) {
        judgements = PyList_GET_ITEM(self->judgements, position);
    }
    PyErr_Clear();
    int rc = 0;
    if (judgements != NULL && PyDict_CheckExact(judgements)) {
        Py_ssize_t nv = 0;
        int status = ck_score_ranking(&self->o, self->want_judged, &self->s,
                                      PySequence_Fast_ITEMS(raw), n, judgements, &nv);
        if (status == Q_ERROR) {
            rc = -1;
        }
        else if (status == Q_NONE || status == Q_SCORED) {
            rc = PyList_Append(self->ranked_at, at) < 0 ? -1 : 1;
            if (rc == 1 && status == Q_SCORED && keep(self, at, qid, self->s.out, nv, n) < 0) {
                rc = -1;
            }
        }
    }
    Py_DECREF(at);
    return rc;
}

static PyObject *
loop_feed(RunLoop *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyIter_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "feed(iterator, need_judged)");
        return NULL;
    }
    int need_judged = PyObject_IsTrue(args[1]);
    if (need_judged < 0) {
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "RunLoop.feed is already running");
        return NULL;
    }
    self->busy = 1;
    PyObject *it = args[0], *result = NULL;
    for (;;) {
        PyObject *item = PyIter_Next(it);
        if (item == NULL) {
            result = PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
            break;
        }
        int rc = take(self, item, need_judged);
        if (rc == 0) {
            result = item; /* the Python loop's */
            break;
        }
        Py_DECREF(item);
        if (rc < 0) {
            break;
        }
    }
    if (result != NULL && flush(self) < 0) {
        Py_CLEAR(result);
    }
    self->busy = 0;
    return result;
}

static PyObject *
loop_counts(RunLoop *self, void *Py_UNUSED(closure))
{
    return Py_BuildValue("(LLLLL)", self->count, self->docs, self->unjudged, self->shown,
                         self->short_);
}

static PyMethodDef loop_methods[] = {
    {"feed", (PyCFunction)(void (*)(void))loop_feed, METH_FASTCALL,
     "feed(iterator, need_judged)\n--\n\n"
     "Score the pairs of iterator until one must go to Python (returned) or none is left "
     "(None)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef loop_getset[] = {
    {"counts", (getter)loop_counts, NULL,
     "(queries scored, docs in the tops, unjudged among them, rankings with a doc, rankings "
     "with an unjudged doc in their top)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ck_RunLoopType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ragmeter.metrics._ckernel.RunLoop",
    .tp_basicsize = sizeof(RunLoop),
    .tp_dealloc = (destructor)loop_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RunLoop(index, judgements, ks, codes, level, cut, jpos, examples, run_ids, "
              "ranked_at, positions, ids, values)\n--\n\n"
              "A run's pairs scored in one C loop into the given lists and array('d').",
    .tp_methods = loop_methods,
    .tp_getset = loop_getset,
    .tp_new = loop_new,
};
