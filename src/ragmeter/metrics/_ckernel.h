/* What the two files of ragmeter.metrics._ckernel share: one ranking of str ids scored.
 *
 * _ckernel.c holds score_query (one query, the compiled twin of the Python kernel) and the
 * module; _ckernel_run.c the RunLoop type (a whole run of rankings scored in one C loop). Both
 * score a ranking with ck_score_ranking, which finds each judged doc's rank through a hash
 * table of the ranking's doc ids (which also finds a repeated doc) and leaves the arithmetic
 * to _kvalues.h.
 */
#ifndef RAGMETER_CKERNEL_H
#define RAGMETER_CKERNEL_H

#include "_kvalues.h"

#define EXACT_LIMIT 9007199254740992LL /* 2**53: ints up to it are exact as doubles */

/* What ck_score_ranking says of a ranking. */
enum {
    Q_ERROR = -1,   /* an exception is set (no memory) */
    Q_NONE = 0,     /* no relevant judgement: not scored */
    Q_SCORED = 1,   /* the values are in the scratch's out */
    Q_OTHER = 2,    /* an input the Python kernel must see (an id that is not an exact str, a
                       grade that is not an exact int, float or bool within 2**53) */
    Q_REPEATED = 3, /* scored, and the ranking repeats a doc id */
};

/* A doc table slot: in use by the current ranking when its stamp is the scratch's. */
typedef struct {
    Py_hash_t hash;
    uint32_t index; /* position in the ranking */
    uint32_t stamp;
} Slot;

/* Room for one ranking's doc table, its tally and its values, grown on demand. A ranking
 * takes a new stamp instead of clearing the table (cleared when the stamps wrap around). */
typedef struct {
    char *block;
    Py_ssize_t slots_cap, nj_cap, nk, nvals;
    uint32_t stamp;
    Slot *slots;
    Tally t;
    double *out;
} Scratch;

extern Log2Table ck_log2;        /* log2(r + 1), shared by every call (grown with the GIL) */
extern PyTypeObject ck_RunLoopType;

/* 1 and the value in *out for an exact float, or exact int or bool, within +-2**53; else 0. */
int ck_exact_double(PyObject *v, double *out);

/* A list or tuple of exact ints in [lo, hi] (ascending when asked) into out: 1, or 0. */
int ck_parse_ints(PyObject *seq, int64_t *out, long long lo, long long hi, int ascending);

/* Make room for a ranking of n docs and nj judgements; 0, or -1 (MemoryError set). */
int ck_scratch_fit(Scratch *s, Py_ssize_t n, Py_ssize_t nj, Py_ssize_t nk, Py_ssize_t nvals);
void ck_scratch_free(Scratch *s);

/* Score items[0..n) (the ranking) against judgements (an exact dict): a Q_ status; for
 * Q_SCORED, *nv values in s->out. No Python code runs and no object is made. */
int ck_score_ranking(const Options *o, int want_judged, Scratch *s, PyObject *const *items,
                     Py_ssize_t n, PyObject *judgements, Py_ssize_t *nv);

/* A float object for x (the shared +0.0 and 1.0 objects for those). */
PyObject *ck_float(double x);

#endif /* RAGMETER_CKERNEL_H */
