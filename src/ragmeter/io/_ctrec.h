/* ragmeter.io._ctrec's shared part: lines cut from blocks, fields, and Python's numbers.
 *
 * Included by _ctrec.c (the module and RunParser) and _ctrec_qrels.c (QrelsParser); see the
 * module's docstring in _ctrec.c for the rules these follow.
 */
#ifndef RAGMETER_CTREC_H
#define RAGMETER_CTREC_H
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

/* str.split()'s ASCII whitespace: \t \n \v \f \r, \x1c-\x1f and space */
enum { TOKEN_BYTE = 0, SPACE = 1 };
static const unsigned char byte_class[256] = {
    [0x09] = SPACE, [0x0a] = SPACE, [0x0b] = SPACE, [0x0c] = SPACE, [0x0d] = SPACE,
    [0x1c] = SPACE, [0x1d] = SPACE, [0x1e] = SPACE, [0x1f] = SPACE, [0x20] = SPACE,
};

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
static inline int
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
static inline int
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
static inline int
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
static inline PyObject *
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
static inline PyObject *
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
static inline PyObject *
ascii_str(const char *p, Py_ssize_t n)
{
    PyObject *s = PyUnicode_New(n, 127);
    if (s != NULL) memcpy(PyUnicode_DATA(s), p, (size_t)n);
    return s;
}

/* Whether p[0:n] holds a byte >= 0x80 (then its lines must be decoded before they are split). */
static inline int
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
static inline int
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
static inline PyObject *
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

static inline int
is_comment_str(PyObject *field)
{
    return PyUnicode_GET_LENGTH(field) > 0 && PyUnicode_READ_CHAR(field, 0) == '#';
}

/* Whether str `s` holds exactly the ASCII bytes p[0:n]. */
static inline int
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

static inline int
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
static inline int
one_line(Lines *lines, void *self, LineFn fn, const char *p, const char *e, int ascii)
{
    if (++lines->lineno == 1) {
        for (int i = 0; i < 2 && e - p >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0; i++) p += 3;
    }
    return fn(self, p, e, lines->lineno, ascii || !any_high(p, e - p));
}

/* Hand each whole line of `data` (the carried partial line first) to `fn`; keep the
 * trailing partial line, or with `final` hand it over too (a last line without newline). */
static inline int
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

static inline int
no_arguments(const char *name, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) == 0 && (kwds == NULL || PyDict_GET_SIZE(kwds) == 0)) return 1;
    PyErr_Format(PyExc_TypeError, "%s() takes no arguments", name);
    return 0;
}

extern PyTypeObject QrelsParserType;

#endif
