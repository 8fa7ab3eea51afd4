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
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define OK 0
#define IRREGULAR 1 /* the Python reader must read this file (no exception set) */
#define FAILED (-1) /* a Python exception is set (MemoryError) */

#define EXACT_LIMIT 9007199254740992LL /* 2**53 */

enum { TOKEN_BYTE = 0, SPACE = 1 };
static unsigned char byte_class[256];

static PyObject *array_of_one_zero = NULL; /* array('d', [0.0]): repeated to make score arrays */

typedef struct {
    const char *p;
    Py_ssize_t n;
} Token;

/* ------------------------------------------------------------------ numbers */

#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
#define FAST_DECIMALS 1
static const double powers_of_ten[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                         1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                         1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
#else
#define FAST_DECIMALS 0
#endif

/* A plain decimal [+-]digits[.digits][e[+-]digits] whose digits make an integer m <= 2**53
 * and whose power of ten |e| <= 22: m and 10**|e| are exact doubles, so one multiplication or
 * division gives the correctly rounded value, the one float() gives. 1 when converted. */
static int
short_decimal(const char *p, Py_ssize_t n, double *out)
{
#if FAST_DECIMALS
    const char *end = p + n;
    int negative = 0, digits = 0;
    long long exponent = 0;
    uint64_t m = 0;
    if (p < end && (*p == '+' || *p == '-')) {
        negative = *p == '-';
        p++;
    }
    for (; p < end && *p >= '0' && *p <= '9'; p++, digits++) {
        if (m > (uint64_t)EXACT_LIMIT / 10) return 0;
        m = m * 10 + (uint64_t)(*p - '0');
    }
    if (p < end && *p == '.') {
        for (p++; p < end && *p >= '0' && *p <= '9'; p++, digits++) {
            if (m > (uint64_t)EXACT_LIMIT / 10) return 0;
            m = m * 10 + (uint64_t)(*p - '0');
            exponent--;
        }
    }
    if (digits == 0 || m > (uint64_t)EXACT_LIMIT) return 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        int sign = 1, exp_digits = 0;
        long long e = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) sign = *p++ == '-' ? -1 : 1;
        for (; p < end && *p >= '0' && *p <= '9'; p++, exp_digits++) {
            if (e > 100000) return 0;
            e = e * 10 + (*p - '0');
        }
        if (exp_digits == 0) return 0;
        exponent += sign * e;
    }
    if (p != end) return 0;
    double value;
    if (m == 0) value = 0.0;
    else if (exponent >= 0 && exponent <= 22) value = (double)m * powers_of_ten[exponent];
    else if (exponent < 0 && exponent >= -22) value = (double)m / powers_of_ten[-exponent];
    else return 0;
    *out = negative ? -value : value;
    return 1;
#else
    (void)p;
    (void)n;
    (void)out;
    return 0;
#endif
}

/* float(token) for an ASCII token: 1 with *out set, 0 when float() would refuse it. */
static int
ascii_float(const char *p, Py_ssize_t n, double *out)
{
    if (short_decimal(p, n, out)) return 1;
    if (memchr(p, '_', (size_t)n) == NULL && n < 256) {
        char copy[256];
        char *stop = NULL;
        memcpy(copy, p, (size_t)n);
        copy[n] = '\0';
        double value = PyOS_string_to_double(copy, &stop, NULL);
        if (value == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (stop != copy + n) return 0;
        *out = value;
        return 1;
    }
    PyObject *text = PyUnicode_DecodeASCII(p, n, "strict");
    if (text == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *number = PyFloat_FromString(text);
    Py_DECREF(text);
    if (number == NULL) {
        PyErr_Clear();
        return 0;
    }
    *out = PyFloat_AS_DOUBLE(number);
    Py_DECREF(number);
    return 1;
}

/* float(token) for a str token: 1 with *out set, 0 when float() refuses it. */
static int
str_float(PyObject *token, double *out)
{
    if (PyUnicode_IS_ASCII(token))
        return ascii_float(PyUnicode_DATA(token), PyUnicode_GET_LENGTH(token), out);
    PyObject *number = PyFloat_FromString(token);
    if (number == NULL) {
        PyErr_Clear();
        return 0;
    }
    *out = PyFloat_AS_DOUBLE(number);
    Py_DECREF(number);
    return 1;
}

/* The qrels grade of a str token, as the Python reader makes it: int(token), else
 * int(float(token)) when that is integral; NULL (no exception set) when it is refused or
 * |grade| > 2**53. */
static PyObject *
str_grade(PyObject *token)
{
    PyObject *value = PyLong_FromUnicodeObject(token, 10);
    if (value == NULL) {
        PyErr_Clear();
        double d;
        if (!str_float(token, &d) || !isfinite(d) || floor(d) != d) return NULL;
        value = PyLong_FromDouble(d);
        if (value == NULL) {
            PyErr_Clear();
            return NULL;
        }
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred()) || v > EXACT_LIMIT || v < -EXACT_LIMIT) {
        PyErr_Clear();
        Py_DECREF(value);
        return NULL;
    }
    return value;
}

/* The grade of an ASCII token: [+-]digits (at most 15, so within 2**53) here, anything else
 * through str_grade. NULL (no exception set) when refused. */
static PyObject *
ascii_grade(const char *p, Py_ssize_t n)
{
    const char *q = p, *end = p + n;
    int negative = 0;
    if (q < end && (*q == '+' || *q == '-')) negative = *q++ == '-';
    if (end - q >= 1 && end - q <= 15) {
        long long v = 0;
        const char *r = q;
        for (; r < end && *r >= '0' && *r <= '9'; r++) v = v * 10 + (*r - '0');
        if (r == end) return PyLong_FromLongLong(negative ? -v : v);
    }
    PyObject *token = PyUnicode_DecodeASCII(p, n, "strict");
    if (token == NULL) return NULL;
    PyObject *value = str_grade(token);
    Py_DECREF(token);
    return value;
}

/* ------------------------------------------------------------------ lines and fields */

/* An ASCII str holding p[0:n]. */
static PyObject *
ascii_str(const char *p, Py_ssize_t n)
{
    PyObject *s = PyUnicode_New(n, 127);
    if (s != NULL) memcpy(PyUnicode_DATA(s), p, (size_t)n);
    return s;
}

/* Whether p[0:n] holds a byte >= 0x80 (then its lines must be decoded before they are split). */
static int
any_high(const char *p, Py_ssize_t n)
{
    uint64_t seen = 0, w;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        seen |= w;
    }
    for (; i < n; i++) seen |= (unsigned char)p[i];
    return (seen & 0x8080808080808080ULL) != 0;
}

/* The end of the field starting at p in ASCII line [p, e): 8 bytes at a time, the first byte
 * <= 0x20 found by the classic "has less than" word trick (exact for the lowest byte of the
 * word, all of whose bytes are < 0x80), then looked up (a control byte that str.split() keeps
 * inside a field is stepped over). */
static inline const char *
field_end(const char *p, const char *e)
{
#if PY_LITTLE_ENDIAN && defined(__GNUC__)
    while (e - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t low = (w - 0x2121212121212121ULL) & ~w & 0x8080808080808080ULL;
        if (low == 0) {
            p += 8;
            continue;
        }
        p += __builtin_ctzll(low) >> 3;
        if (byte_class[(unsigned char)*p] == SPACE) return p;
        p++;
    }
#endif
    while (p < e && byte_class[(unsigned char)*p] != SPACE) p++;
    return p;
}

/* The fields of ASCII line [p, e), at most `want` of them: their number, or want + 1 when
 * there are more. */
static int
ascii_fields(const char *p, const char *e, Token *fields, int want)
{
    int n = 0;
    for (;;) {
        while (p < e && byte_class[(unsigned char)*p] == SPACE) p++;
        if (p == e) return n;
        if (n == want) return want + 1;
        const char *start = p;
        p = field_end(p, e);
        fields[n].p = start;
        fields[n].n = p - start;
        n++;
    }
}

/* A non-ASCII line decoded and split by str.split(); NULL (no exception set) when it is not
 * UTF-8, or on a memory error (exception set). */
static PyObject *
unicode_fields(const char *p, const char *e)
{
    PyObject *line = PyUnicode_DecodeUTF8(p, e - p, "strict");
    if (line == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
        return NULL;
    }
    PyObject *fields = PyUnicode_Split(line, NULL, -1);
    Py_DECREF(line);
    return fields;
}

static int
is_comment_str(PyObject *field)
{
    return PyUnicode_GET_LENGTH(field) > 0 && PyUnicode_READ_CHAR(field, 0) == '#';
}

/* Whether str `s` holds exactly the ASCII bytes p[0:n]. */
static int
str_is(PyObject *s, const char *p, Py_ssize_t n)
{
    return PyUnicode_IS_COMPACT_ASCII(s) && PyUnicode_GET_LENGTH(s) == n &&
           memcmp(PyUnicode_DATA(s), p, (size_t)n) == 0;
}

/* The bytes left of a partial line at the end of a block, and the line count. */
typedef struct {
    char *buf;
    Py_ssize_t len, cap;
    long long lineno;
    int failed;
} Lines;

static int
carry(Lines *lines, const char *p, Py_ssize_t n)
{
    if (lines->len + n > lines->cap) {
        Py_ssize_t cap = (lines->len + n) * 2 + 64;
        char *buf = PyMem_Realloc(lines->buf, (size_t)cap);
        if (buf == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
        lines->buf = buf;
        lines->cap = cap;
    }
    memcpy(lines->buf + lines->len, p, (size_t)n);
    lines->len += n;
    return OK;
}

typedef int (*LineFn)(void *self, const char *p, const char *e, long long lineno, int ascii);

/* Line [p, e) (without its newline) to `fn`, numbered; the first line loses up to two BOMs.
 * `ascii`: the line is known to hold no byte >= 0x80 (else it is looked at). */
static int
one_line(Lines *lines, void *self, LineFn fn, const char *p, const char *e, int ascii)
{
    if (++lines->lineno == 1) {
        for (int i = 0; i < 2 && e - p >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0; i++) p += 3;
    }
    return fn(self, p, e, lines->lineno, ascii || !any_high(p, e - p));
}

/* Hand each whole line of `data` (the carried partial line first) to `fn`; keep the
 * trailing partial line, or with `final` hand it over too (a last line without newline). */
static int
feed_lines(Lines *lines, void *self, LineFn fn, const char *data, Py_ssize_t n, int final)
{
    const char *p = data, *end = data + n;
    int r, ascii = !any_high(data, n);
    if (lines->len) {
        const char *nl = memchr(p, '\n', (size_t)n);
        if ((r = carry(lines, p, (nl ? nl : end) - p)) != OK) return r;
        if (nl == NULL && !final) return OK;
        r = one_line(lines, self, fn, lines->buf, lines->buf + lines->len, 0);
        lines->len = 0;
        if (r != OK || nl == NULL) return r;
        p = nl + 1;
    }
    for (;;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL) break;
        if ((r = one_line(lines, self, fn, p, nl, ascii)) != OK) return r;
        p = nl + 1;
    }
    if (p == end) return OK;
    if (final) return one_line(lines, self, fn, p, end, ascii);
    return carry(lines, p, end - p);
}

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

static int
no_arguments(const char *name, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) == 0 && (kwds == NULL || PyDict_GET_SIZE(kwds) == 0)) return 1;
    PyErr_Format(PyExc_TypeError, "%s() takes no arguments", name);
    return 0;
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

static PyTypeObject QrelsParserType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ragmeter.io._ctrec.QrelsParser",
    .tp_basicsize = sizeof(QrelsParser),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A TREC qrels file read a block of bytes at a time (see the module's docstring).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)qrels_init,
    .tp_dealloc = (destructor)qrels_dealloc,
    .tp_methods = qrels_methods,
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
    for (int c = 0; c < 256; c++)
        byte_class[c] = (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) ? SPACE : TOKEN_BYTE;
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
