/* ragmeter.io._cotlp: the spans of a decoded OTLP/JSON line made at C speed.
 *
 * The compiled twin of the Python half of ragmeter.io._otlp_fast.decode_line (whose Python code
 * stays the reference and the fallback): msgspec still parses the JSON into the _TracesData,
 * _Span, _KeyValue ... Structs; this module walks them and makes the spans by the same rules
 * (a field is read from its slot, where msgspec keeps it, at the offset its member descriptor
 * gives, once the class is known; else, and for any other class, with PyObject_GetAttr):
 *
 * - an attribute's value is its stringValue when set, else int(intValue) when that is set (what
 *   Python's _other gives it), else its doubleValue when that is a float, else whatever
 *   `other(value)` (Python's _other) returns or raises;
 * - an id of the exact form hex_id gives (2 * size lowercase hex digits) is kept as it is,
 *   anything else is given to `hex_id(value, size, what)` (Python's), its result cached per line;
 * - a span whose status code is in `error_codes` has its status message as its error, and a
 *   span with such a status but no message raises ValueError (decode_line makes every ValueError
 *   Unhandled: the json reader reads the line, and words the error from the exception event);
 * - a parent whose span's flags say "remote" (flags & remote_parent == remote_parent) is None;
 * - times and the dropped count are int(x or 0), a str holding an int read by int().
 *
 * When `make` is a class with TraceSpan's eleven slots (member descriptors of objects, no
 * __new__ of its own) a span is made without calling its __init__: it is allocated with the
 * class's tp_alloc and its slots are set to what TraceSpan.__init__ sets them to (parent_id
 * None for ""/None, kind the OpenInference kind attribute upper-cased when it is a str, else
 * ""). Any other `make` is called with TraceSpan's ten arguments. Every exception (a bad id, an
 * int() that fails, _other's Unhandled) propagates as it is.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* ------------------------------------------------------------------ names */

static PyObject *s_kind, *s_upper, *s_empty, *s_zero, *s_eight, *s_sixteen;

/* The Structs' fields read here. A field is read straight from its slot when the object is of
 * the class it was first read on and that class keeps it in a slot (a member descriptor, as
 * msgspec's Structs do); anything else is read with PyObject_GetAttr. */
typedef struct {
    const char *text;
    PyObject *name;     /* interned */
    PyTypeObject *type; /* the class whose slot is read (a strong reference), NULL: none */
    Py_ssize_t offset;
    int tried;
} Field;

enum { TRACES_RESOURCES, RESOURCE_SCOPES, RESOURCE_IL, SS_SCOPE, SS_IL, SS_SPANS, SCOPE_NAME,
       SPAN_TRACE, SPAN_SPAN, SPAN_PARENT, SPAN_NAME, SPAN_START, SPAN_END, SPAN_ATTRIBUTES,
       SPAN_STATUS, SPAN_FLAGS, SPAN_DROPPED, STATUS_CODE, STATUS_MESSAGE, KV_KEY, KV_VALUE,
       ANY_STRING, ANY_INT, ANY_DOUBLE, N_READS };
static Field reads[N_READS] = {
    [TRACES_RESOURCES] = {"resourceSpans"},
    [RESOURCE_SCOPES] = {"scopeSpans"},
    [RESOURCE_IL] = {"instrumentationLibrarySpans"},
    [SS_SCOPE] = {"scope"},
    [SS_IL] = {"instrumentationLibrary"},
    [SS_SPANS] = {"spans"},
    [SCOPE_NAME] = {"name"},
    [SPAN_TRACE] = {"traceId"},
    [SPAN_SPAN] = {"spanId"},
    [SPAN_PARENT] = {"parentSpanId"},
    [SPAN_NAME] = {"name"},
    [SPAN_START] = {"startTimeUnixNano"},
    [SPAN_END] = {"endTimeUnixNano"},
    [SPAN_ATTRIBUTES] = {"attributes"},
    [SPAN_STATUS] = {"status"},
    [SPAN_FLAGS] = {"flags"},
    [SPAN_DROPPED] = {"droppedAttributesCount"},
    [STATUS_CODE] = {"code"},
    [STATUS_MESSAGE] = {"message"},
    [KV_KEY] = {"key"},
    [KV_VALUE] = {"value"},
    [ANY_STRING] = {"stringValue"},
    [ANY_INT] = {"intValue"},
    [ANY_DOUBLE] = {"doubleValue"},
};

/* The slot of `name` in objects of `type` (a member descriptor holding an object), or -1 (no
 * exception set). */
static Py_ssize_t
slot_offset(PyTypeObject *type, PyObject *name)
{
    PyObject *descr = PyObject_GetAttr((PyObject *)type, name); /* the descriptor itself */
    Py_ssize_t offset = -1;
    if (descr == NULL) {
        PyErr_Clear();
        return -1;
    }
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if ((member->type == T_OBJECT_EX || member->type == T_OBJECT) &&
            PyType_IsSubtype(type, ((PyDescrObject *)descr)->d_type)) {
            offset = member->offset;
        }
    }
    Py_DECREF(descr);
    return offset;
}

static PyObject *
get_slow(PyObject *obj, Field *field)
{
    if (!field->tried) {
        field->tried = 1;
        field->offset = slot_offset(Py_TYPE(obj), field->name);
        if (field->offset >= 0) field->type = (PyTypeObject *)Py_NewRef(Py_TYPE(obj));
    }
    return PyObject_GetAttr(obj, field->name);
}

/* obj.<field> (a new reference; NULL with AttributeError when it is unset). */
static inline PyObject *
get_field(PyObject *obj, Field *field)
{
    if (Py_TYPE(obj) == field->type) {
        PyObject *value = *(PyObject **)((char *)obj + field->offset);
        if (value != NULL) return Py_NewRef(value);
    }
    return get_slow(obj, field);
}
#define get(obj, which) get_field((obj), &reads[which])

/* TraceSpan's slots, in the order of its __init__'s arguments, then kind */
enum { F_TRACE, F_SPAN, F_PARENT, F_NAME, F_ATTRIBUTES, F_START, F_END, F_ERROR, F_SCOPE,
       F_DROPPED, F_KIND, N_FIELDS };
static const char *const field_names[N_FIELDS] = {
    "trace_id", "span_id", "parent_id", "name", "attributes", "start", "end", "error", "scope",
    "dropped", "kind",
};
static PyObject *field_strs[N_FIELDS];

static PyObject *made_type = NULL;       /* the last class `make` was (a strong reference) */
static int made_direct = 0;              /* whether its slots are set here */
static Py_ssize_t made_offsets[N_FIELDS];

typedef struct {
    PyObject *make, *hex_id, *error_codes, *remote_parent, *other;
    PyObject *traces, *seen; /* hex_id's results for trace ids and span ids (NULL: none yet) */
} Line;

/* ------------------------------------------------------------------ the class made */

/* Whether `make` is a class whose slots this module sets (its layout cached), -1 on error. */
static int
direct_layout(PyObject *make)
{
    if (make == made_type) return made_direct;
    Py_ssize_t offsets[N_FIELDS];
    int direct = PyType_Check(make) && ((PyTypeObject *)make)->tp_new == PyBaseObject_Type.tp_new;
    for (int i = 0; direct && i < N_FIELDS; i++) {
        PyObject *descr = PyObject_GetAttr(make, field_strs[i]);
        if (descr == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
            direct = 0;
            break;
        }
        if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
            PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
            PyTypeObject *owner = ((PyDescrObject *)descr)->d_type;
            direct = member->type == T_OBJECT_EX && !(member->flags & READONLY) &&
                     PyType_IsSubtype((PyTypeObject *)make, owner);
            offsets[i] = member->offset;
        }
        else {
            direct = 0;
        }
        Py_DECREF(descr);
    }
    Py_INCREF(make);
    Py_XSETREF(made_type, make);
    made_direct = direct;
    if (direct) memcpy(made_offsets, offsets, sizeof(offsets));
    return direct;
}

static PyObject *kind_of(PyObject *attributes);

/* A new span of `make`'s arguments in `values` (its first ten: their references stolen, also on
 * error): `make` called with them, or its class allocated and its slots set as
 * TraceSpan.__init__ sets them (parent_id None for a false one, kind from the attributes). */
static PyObject *
make_span(Line *line, PyObject **values)
{
    PyObject *span = NULL;
    int direct = direct_layout(line->make);
    if (direct > 0 && values[F_PARENT] != Py_None) {
        int set = PyObject_IsTrue(values[F_PARENT]);
        if (set == 0) Py_SETREF(values[F_PARENT], Py_NewRef(Py_None));
        if (set < 0) direct = -1;
    }
    if (direct > 0 && (values[F_KIND] = kind_of(values[F_ATTRIBUTES])) != NULL) {
        PyTypeObject *type = (PyTypeObject *)line->make;
        span = type->tp_alloc(type, 0);
        for (int i = 0; span != NULL && i < N_FIELDS; i++) {
            *(PyObject **)((char *)span + made_offsets[i]) = values[i];
            values[i] = NULL;
        }
    }
    else if (direct == 0) {
        span = PyObject_Vectorcall(line->make, values, F_KIND, NULL);
    }
    for (int i = 0; i < N_FIELDS; i++) Py_XDECREF(values[i]);
    return span;
}

/* TraceSpan's kind: the kind attribute upper-cased if it is a str, else "". */
static PyObject *
kind_of(PyObject *attributes)
{
    PyObject *kind = PyDict_GetItemWithError(attributes, s_kind); /* borrowed */
    if (kind == NULL) {
        if (PyErr_Occurred()) return NULL;
        return Py_NewRef(s_empty);
    }
    if (!PyUnicode_Check(kind)) return Py_NewRef(s_empty);
    if (PyUnicode_IS_ASCII(kind)) { /* "RETRIEVER": upper already, kept */
        const Py_UCS1 *p = PyUnicode_1BYTE_DATA(kind);
        Py_ssize_t n = PyUnicode_GET_LENGTH(kind), i = 0;
        while (i < n && !(p[i] >= 'a' && p[i] <= 'z')) i++;
        if (i == n && PyUnicode_CheckExact(kind)) return Py_NewRef(kind);
    }
    return PyObject_CallMethodNoArgs(kind, s_upper);
}

/* ------------------------------------------------------------------ attributes */

/* One attribute's value as _attributes reads it (a new reference; NULL on error): its
 * stringValue, else int(intValue) (what _other gives it), else a float doubleValue, else
 * other(value)'s. */
static PyObject *
value_of(PyObject *any_value, PyObject *other)
{
    PyObject *found = get(any_value, ANY_STRING);
    if (found != Py_None) return found; /* a str, or NULL */
    Py_SETREF(found, get(any_value, ANY_INT));
    if (found != Py_None) {
        if (found == NULL || PyLong_CheckExact(found)) return found;
        Py_SETREF(found, PyNumber_Long(found)); /* "300": OTLP/JSON writes int64 as a str */
        return found;
    }
    Py_SETREF(found, get(any_value, ANY_DOUBLE));
    if (found == NULL || PyFloat_CheckExact(found)) return found;
    Py_DECREF(found);
    return PyObject_CallOneArg(other, any_value);
}

static PyObject *
attributes_of(PyObject *items, PyObject *other)
{
    int any = PyObject_IsTrue(items);
    if (any <= 0) return any < 0 ? NULL : PyDict_New();
    PyObject *seq = PySequence_Fast(items, "attributes must be a list");
    if (seq == NULL) return NULL;
    PyObject *out = PyDict_New();
    for (Py_ssize_t i = 0; out != NULL && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *kv = PySequence_Fast_GET_ITEM(seq, i), *any_value = NULL, *value = NULL;
        PyObject *key = get(kv, KV_KEY);
        if (key != NULL) any_value = get(kv, KV_VALUE);
        if (any_value != NULL) value = value_of(any_value, other);
        if (value == NULL || PyDict_SetItem(out, key, value) < 0) Py_CLEAR(out);
        Py_XDECREF(key);
        Py_XDECREF(any_value);
        Py_XDECREF(value);
    }
    Py_DECREF(seq);
    return out;
}

/* ------------------------------------------------------------------ ids, numbers */

/* An id as hex_id gives it: kept when already 2 * size lowercase hex digits, else hex_id's. */
static PyObject *
hex_of(Line *line, PyObject *value, PyObject **cache, PyObject *size, PyObject *what)
{
    Py_ssize_t digits = size == s_sixteen ? 32 : 16;
    if (PyUnicode_CheckExact(value) && PyUnicode_GET_LENGTH(value) == digits &&
        PyUnicode_IS_ASCII(value)) {
        const Py_UCS1 *p = PyUnicode_1BYTE_DATA(value);
        Py_ssize_t i = 0;
        while (i < digits && ((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) i++;
        if (i == digits) return Py_NewRef(value);
    }
    if (*cache != NULL) {
        PyObject *known = PyDict_GetItemWithError(*cache, value);
        if (known != NULL) return Py_NewRef(known);
        if (PyErr_Occurred()) return NULL;
    }
    PyObject *args[3] = {value, size, what};
    PyObject *hex = PyObject_Vectorcall(line->hex_id, args, 3, NULL);
    if (hex == NULL) return NULL;
    if (*cache == NULL && (*cache = PyDict_New()) == NULL) goto fail;
    if (PyDict_SetItem(*cache, value, hex) < 0) goto fail;
    return hex;
fail:
    Py_DECREF(hex);
    return NULL;
}

/* int(value or 0) (a new reference; NULL on error). */
static PyObject *
int_of(PyObject *value)
{
    if (PyLong_CheckExact(value)) return Py_NewRef(value);
    int set = PyObject_IsTrue(value);
    if (set <= 0) return set < 0 ? NULL : Py_NewRef(s_zero);
    return PyNumber_Long(value);
}

/* Whether a span's parent is in another service (its flags say so); -1 on error. */
static int
remote(Line *line, PyObject *span)
{
    PyObject *flags = get(span, SPAN_FLAGS);
    if (flags == NULL) return -1;
    int set = PyObject_IsTrue(flags), out = set;
    if (set > 0) {
        PyObject *number = PyNumber_Long(flags), *masked = NULL;
        if (number != NULL) masked = PyNumber_And(number, line->remote_parent);
        out = masked ? PyObject_RichCompareBool(masked, line->remote_parent, Py_EQ) : -1;
        Py_XDECREF(number);
        Py_XDECREF(masked);
    }
    Py_DECREF(flags);
    return out;
}

/* ------------------------------------------------------------------ spans */

/* The error of a span (its status message; None), a new reference, or NULL with an exception. */
static PyObject *
error_of(Line *line, PyObject *span)
{
    PyObject *status = get(span, SPAN_STATUS), *out = NULL;
    if (status == NULL) return NULL;
    if (status == Py_None) return status;
    PyObject *code = get(status, STATUS_CODE);
    int error = code ? PySequence_Contains(line->error_codes, code) : -1;
    Py_XDECREF(code);
    if (error == 0) out = Py_NewRef(Py_None);
    else if (error > 0 && (out = get(status, STATUS_MESSAGE)) != NULL) {
        int said = PyObject_IsTrue(out);
        if (said <= 0) {
            Py_CLEAR(out);
            if (said == 0) {
                PyErr_SetString(PyExc_ValueError,
                                "an error status without a message: the json reader's");
            }
        }
    }
    Py_DECREF(status);
    return out;
}

static PyObject *
one_span(Line *line, PyObject *span, PyObject *scope)
{
    PyObject *v[N_FIELDS] = {NULL};
    PyObject *parent = NULL, *id = NULL, *field = NULL;
    int has_parent, named;
    v[F_ERROR] = error_of(line, span);
    if (v[F_ERROR] == NULL) goto fail;
    if ((parent = get(span, SPAN_PARENT)) == NULL) goto fail;
    has_parent = PyObject_IsTrue(parent);
    if (has_parent > 0) {
        int elsewhere = remote(line, span);
        has_parent = elsewhere < 0 ? -1 : !elsewhere;
    }
    if (has_parent < 0) goto fail;
    if ((id = get(span, SPAN_TRACE)) == NULL) goto fail;
    v[F_TRACE] = hex_of(line, id, &line->traces, s_sixteen, reads[SPAN_TRACE].name);
    if (v[F_TRACE] == NULL) goto fail;
    Py_SETREF(id, get(span, SPAN_SPAN));
    if (id == NULL) goto fail;
    v[F_SPAN] = hex_of(line, id, &line->seen, s_eight, reads[SPAN_SPAN].name);
    if (v[F_SPAN] == NULL) goto fail;
    v[F_PARENT] = has_parent ? hex_of(line, parent, &line->seen, s_eight, reads[SPAN_PARENT].name)
                             : Py_NewRef(Py_None);
    if (v[F_PARENT] == NULL) goto fail;
    if ((field = get(span, SPAN_NAME)) == NULL) goto fail;
    named = PyObject_IsTrue(field);
    if (named < 0) goto fail;
    v[F_NAME] = named ? Py_NewRef(field) : Py_NewRef(s_empty);
    Py_SETREF(field, get(span, SPAN_ATTRIBUTES));
    if (field == NULL || (v[F_ATTRIBUTES] = attributes_of(field, line->other)) == NULL) goto fail;
    Py_SETREF(field, get(span, SPAN_START));
    if (field == NULL || (v[F_START] = int_of(field)) == NULL) goto fail;
    Py_SETREF(field, get(span, SPAN_END));
    if (field == NULL || (v[F_END] = int_of(field)) == NULL) goto fail;
    v[F_SCOPE] = Py_NewRef(scope);
    Py_SETREF(field, get(span, SPAN_DROPPED));
    if (field == NULL || (v[F_DROPPED] = int_of(field)) == NULL) goto fail;
    Py_DECREF(parent);
    Py_DECREF(id);
    Py_DECREF(field);
    return make_span(line, v); /* takes v's references */
fail:
    for (int i = 0; i < N_FIELDS; i++) Py_XDECREF(v[i]);
    Py_XDECREF(parent);
    Py_XDECREF(id);
    Py_XDECREF(field);
    return NULL;
}

/* The instrumentation scope's name of a ScopeSpans ("" when it has none). */
static PyObject *
scope_name(PyObject *scope)
{
    PyObject *about = get(scope, SS_SCOPE);
    if (about == NULL) return NULL;
    int set = PyObject_IsTrue(about);
    if (set == 0) Py_SETREF(about, get(scope, SS_IL));
    if (set < 0 || about == NULL) {
        Py_XDECREF(about);
        return NULL;
    }
    if (about == Py_None) {
        Py_DECREF(about);
        return Py_NewRef(s_empty);
    }
    PyObject *name = get(about, SCOPE_NAME);
    Py_DECREF(about);
    if (name == NULL) return NULL;
    set = PyObject_IsTrue(name);
    if (set <= 0) Py_SETREF(name, set < 0 ? NULL : Py_NewRef(s_empty));
    return name;
}

/* Appends the spans of one ScopeSpans to `out`; -1 on error. */
static int
scope_spans(Line *line, PyObject *scope, PyObject *out)
{
    PyObject *spans = get(scope, SS_SPANS), *name = NULL, *seq = NULL;
    int status = -1;
    if (spans == NULL) return -1;
    int any = PyObject_IsTrue(spans);
    if (any <= 0) {
        Py_DECREF(spans);
        return any;
    }
    if ((name = scope_name(scope)) == NULL) goto done;
    if ((seq = PySequence_Fast(spans, "spans must be a list")) == NULL) goto done;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *span = one_span(line, PySequence_Fast_GET_ITEM(seq, i), name);
        if (span == NULL) goto done;
        int bad = PyList_Append(out, span);
        Py_DECREF(span);
        if (bad < 0) goto done;
    }
    status = 0;
done:
    Py_DECREF(spans);
    Py_XDECREF(name);
    Py_XDECREF(seq);
    return status;
}

/* Appends the spans of one ResourceSpans to `out`; -1 on error. */
static int
resource_spans(Line *line, PyObject *resource, PyObject *out)
{
    PyObject *scopes = get(resource, RESOURCE_SCOPES), *seq;
    if (scopes == Py_None) { /* before OTLP 0.15 */
        Py_SETREF(scopes, get(resource, RESOURCE_IL));
    }
    if (scopes == NULL) return -1;
    int status = PyObject_IsTrue(scopes);
    if (status <= 0) {
        Py_DECREF(scopes);
        return status;
    }
    seq = PySequence_Fast(scopes, "scopeSpans must be a list");
    status = seq == NULL ? -1 : 0;
    for (Py_ssize_t i = 0; status == 0 && i < PySequence_Fast_GET_SIZE(seq); i++) {
        status = scope_spans(line, PySequence_Fast_GET_ITEM(seq, i), out);
    }
    Py_DECREF(scopes);
    Py_XDECREF(seq);
    return status;
}

/* ------------------------------------------------------------------ module functions */

static PyObject *
spans(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "spans() takes 6 arguments: data, make, hex_id, "
                                         "error_codes, remote_parent, other");
        return NULL;
    }
    Line line = {args[1], args[2], args[3], args[4], args[5], NULL, NULL};
    PyObject *out = NULL, *seq = NULL;
    PyObject *resources = get(args[0], TRACES_RESOURCES);
    if (resources == NULL) return NULL;
    if ((seq = PySequence_Fast(resources, "resourceSpans must be a list")) == NULL) goto fail;
    if ((out = PyList_New(0)) == NULL) goto fail;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        if (resource_spans(&line, PySequence_Fast_GET_ITEM(seq, i), out) < 0) goto fail;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    Py_DECREF(resources);
    Py_XDECREF(seq);
    Py_XDECREF(line.traces);
    Py_XDECREF(line.seen);
    return out;
}

static PyObject *
attributes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "attributes() takes 2 arguments: items, other");
        return NULL;
    }
    return attributes_of(args[0], args[1]);
}

static PyMethodDef methods[] = {
    {"spans", (PyCFunction)(void (*)(void))spans, METH_FASTCALL,
     "spans(data, make, hex_id, error_codes, remote_parent, other) -> the spans of a decoded "
     "_TracesData, in file order, as decode_line makes them (see the module's docstring)"},
    {"attributes", (PyCFunction)(void (*)(void))attributes, METH_FASTCALL,
     "attributes(items, other) -> the dict _otlp_fast._attributes makes of a list of _KeyValue "
     "(or None)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ragmeter.io._cotlp",
    .m_doc = "The spans of a decoded OTLP/JSON line made at C speed (the compiled twin of the "
             "Python half of ragmeter.io._otlp_fast.decode_line).",
    .m_size = -1,
    .m_methods = methods,
};

static int
intern_all(void)
{
    for (int i = 0; i < N_READS; i++) {
        if (reads[i].name == NULL) reads[i].name = PyUnicode_InternFromString(reads[i].text);
        if (reads[i].name == NULL) return -1;
    }
    if (s_kind == NULL) s_kind = PyUnicode_InternFromString("openinference.span.kind");
    if (s_kind == NULL) return -1;
    if (s_upper == NULL && (s_upper = PyUnicode_InternFromString("upper")) == NULL) return -1;
    if (s_empty == NULL && (s_empty = PyUnicode_InternFromString("")) == NULL) return -1;
    for (int i = 0; i < N_FIELDS; i++) {
        if (field_strs[i] == NULL) field_strs[i] = PyUnicode_InternFromString(field_names[i]);
        if (field_strs[i] == NULL) return -1;
    }
    if (s_zero == NULL && (s_zero = PyLong_FromLong(0)) == NULL) return -1;
    if (s_eight == NULL && (s_eight = PyLong_FromLong(8)) == NULL) return -1;
    if (s_sixteen == NULL && (s_sixteen = PyLong_FromLong(16)) == NULL) return -1;
    return 0;
}

PyMODINIT_FUNC
PyInit__cotlp(void)
{
    if (intern_all() < 0) return NULL;
    return PyModule_Create(&module_def);
}
