/* ragmeter.io._ctrec.QrelsParser: a TREC qrels file read a block of bytes at a time.
 *
 * {query_id: {doc_id: grade}} in first-seen order, a grade int(token) or an integral
 * float(token) with |grade| <= 2**53, a judgement repeated with the same grade counted and kept
 * once; anything the Python reader would refuse makes the file irregular (see _ctrec.c).
 */
#include "_ctrec.h"

/* ------------------------------------------------------------------ qrels */

typedef struct {
    PyObject_HEAD Lines lines;
    PyObject *qrels;     /* {qid: {doc: grade}} */
    PyObject *qid;       /* the query of the last line, and its dict (borrowed from qrels) */
    PyObject *judged;
    Py_ssize_t repeats;  /* lines that repeat a judgement with the same grade */
} QrelsParser;

/* Judge doc for qid (the last line's query when qid is NULL); steals all three. */
static int
add_judgement(QrelsParser *self, PyObject *qid, PyObject *doc, PyObject *grade)
{
    int r = FAILED;
    if (qid != NULL) {
        PyObject *judged = PyDict_GetItemWithError(self->qrels, qid);
        if (judged == NULL) {
            if (PyErr_Occurred()) goto done;
            judged = PyDict_New();
            if (judged == NULL) goto done;
            int set = PyDict_SetItem(self->qrels, qid, judged);
            Py_DECREF(judged);
            if (set < 0) goto done;
        }
        Py_XSETREF(self->qid, qid);
        qid = NULL;
        self->judged = judged;
    }
    PyObject *known = PyDict_GetItemWithError(self->judged, doc);
    if (known != NULL) {
        int same = PyObject_RichCompareBool(known, grade, Py_EQ);
        if (same < 0) goto done;
        r = same ? OK : IRREGULAR;
        self->repeats += same;
    }
    else if (!PyErr_Occurred())
        r = PyDict_SetItem(self->judged, doc, grade) < 0 ? FAILED : OK;
done:
    Py_XDECREF(qid);
    Py_DECREF(doc);
    Py_DECREF(grade);
    return r;
}

static int
qrels_line_unicode(QrelsParser *self, const char *p, const char *e)
{
    PyObject *fields = unicode_fields(p, e);
    if (fields == NULL) return PyErr_Occurred() ? FAILED : IRREGULAR;
    Py_ssize_t n = PyList_GET_SIZE(fields);
    int r = OK;
    if (n == 0 || is_comment_str(PyList_GET_ITEM(fields, 0))) r = OK;
    else if (n != 4) r = IRREGULAR;
    else {
        PyObject *grade = str_grade(PyList_GET_ITEM(fields, 3));
        if (grade == NULL) r = PyErr_Occurred() ? FAILED : IRREGULAR;
        else {
            PyObject *qid = PyList_GET_ITEM(fields, 0), *doc = PyList_GET_ITEM(fields, 2);
            int same = self->qid != NULL && PyUnicode_Compare(self->qid, qid) == 0;
            Py_INCREF(doc);
            if (!same) Py_INCREF(qid);
            r = add_judgement(self, same ? NULL : qid, doc, grade);
        }
    }
    Py_DECREF(fields);
    return r;
}

static int
qrels_line(void *me, const char *p, const char *e, long long lineno, int ascii)
{
    QrelsParser *self = me;
    (void)lineno;
    if (!ascii) return qrels_line_unicode(self, p, e);
    Token f[4];
    int n = ascii_fields(p, e, f, 4);
    if (n == 0 || f[0].p[0] == '#') return OK;
    if (n != 4) return IRREGULAR;
    PyObject *grade = ascii_grade(f[3].p, f[3].n);
    if (grade == NULL) return PyErr_Occurred() ? FAILED : IRREGULAR;
    PyObject *qid = NULL;
    if (self->qid == NULL || !str_is(self->qid, f[0].p, f[0].n)) {
        qid = ascii_str(f[0].p, f[0].n);
        if (qid == NULL) {
            Py_DECREF(grade);
            return FAILED;
        }
    }
    PyObject *doc = ascii_str(f[2].p, f[2].n);
    if (doc == NULL) {
        Py_XDECREF(qid);
        Py_DECREF(grade);
        return FAILED;
    }
    return add_judgement(self, qid, doc, grade);
}

static PyObject *
qrels_result(QrelsParser *self, int r)
{
    if (r != OK) {
        self->lines.failed = 1;
        Py_CLEAR(self->qid);
        self->judged = NULL;
        Py_CLEAR(self->qrels);
        if (r == FAILED) return NULL;
    }
    return PyBool_FromLong(r == OK);
}

static PyObject *
qrels_feed(QrelsParser *self, PyObject *arg)
{
    if (self->lines.failed || self->qrels == NULL) Py_RETURN_FALSE;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int r = feed_lines(&self->lines, self, qrels_line, view.buf, view.len, 0);
    PyBuffer_Release(&view);
    return qrels_result(self, r);
}

static PyObject *
qrels_finish(QrelsParser *self, PyObject *Py_UNUSED(ignored))
{
    if (self->lines.failed || self->qrels == NULL) Py_RETURN_NONE;
    PyObject *ok = qrels_result(self, feed_lines(&self->lines, self, qrels_line, "", 0, 1));
    if (ok != Py_True) return ok == NULL ? NULL : (Py_DECREF(ok), Py_NewRef(Py_None));
    Py_DECREF(ok);
    PyObject *result = Py_BuildValue("(On)", self->qrels, self->repeats);
    Py_CLEAR(self->qrels);
    Py_CLEAR(self->qid);
    self->judged = NULL;
    self->lines.failed = 1; /* read once */
    return result;
}

static int
qrels_init(QrelsParser *self, PyObject *args, PyObject *kwds)
{
    if (!no_arguments("QrelsParser", args, kwds)) return -1;
    Py_CLEAR(self->qid);
    self->judged = NULL;
    self->repeats = 0;
    self->lines.len = 0;
    self->lines.lineno = 0;
    self->lines.failed = 0;
    Py_XSETREF(self->qrels, PyDict_New());
    return self->qrels == NULL ? -1 : 0;
}

static void
qrels_dealloc(QrelsParser *self)
{
    Py_XDECREF(self->qid);
    Py_XDECREF(self->qrels);
    PyMem_Free(self->lines.buf);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef qrels_methods[] = {
    {"feed", (PyCFunction)qrels_feed, METH_O,
     "feed(block) -> True, or False when the file is irregular (the Python reader must read it)"},
    {"finish", (PyCFunction)qrels_finish, METH_NOARGS,
     "finish() -> ({query_id: {doc_id: grade}}, repeats), or None (irregular)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject QrelsParserType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ragmeter.io._ctrec.QrelsParser",
    .tp_basicsize = sizeof(QrelsParser),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A TREC qrels file read a block of bytes at a time (see the module's docstring).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)qrels_init,
    .tp_dealloc = (destructor)qrels_dealloc,
    .tp_methods = qrels_methods,
};

