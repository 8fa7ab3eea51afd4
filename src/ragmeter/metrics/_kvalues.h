/* The per-query arithmetic of the compiled kernels: one query's judgements in, its values out.
 *
 * Shared by _ckernel.c (rankings of Python str ids) and _ccolumns.c (rankings in Arrow
 * columns), so both compute every value with the same IEEE operations in the same order as
 * ragmeter.metrics._kernel.py_score_query, bit for bit. A caller finds each judged doc's
 * 1-based rank in its ranking (0: not retrieved) its own way, adds the judgements one by one
 * (tally_add) and asks for the values (tally_values), in result_keys order:
 *
 *   precision@k  relevant ranks <= k, over k
 *   recall@k     relevant ranks <= k, over the relevant count
 *   hit_rate@k   1.0 when a relevant rank <= k
 *   mrr@k, mrr   1 / the first relevant rank (0 beyond k)
 *   map@k, map   the sum of (relevant so far / rank) over the relevant ranks <= k, over the
 *                relevant count (rank ascending)
 *   ndcg@k       DCG of the retrieved positive grades within k (gain / log2(rank + 1), rank
 *                ascending) over the ideal DCG of the k best grades
 *   judged@k     judged ranks <= k, over min(k, n); 0.0 for an empty ranking
 *
 * A doc is relevant when its grade is > 0, or >= the relevance level when one is given.
 */
#ifndef RAGMETER_KVALUES_H
#define RAGMETER_KVALUES_H

#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { NDCG, RECALL, PRECISION, HIT_RATE, MRR, MAP, JUDGED, N_CODES };

typedef struct {
    int64_t rank; /* 1-based */
    double grade;
} Hit;

/* log2(r + 1) for each rank r, grown on demand (v[0] unused). */
typedef struct {
    double *v;
    int64_t size;
} Log2Table;

/* What every query of a call shares: the cut-offs (ascending, >= 1), the metric codes and the
 * relevance level. */
typedef struct {
    const int64_t *ks;
    Py_ssize_t nk;
    const int64_t *codes;
    Py_ssize_t nc;
    int has_level;
    double level;
} Options;

/* One query's judgements as added so far, in caller-provided room (tally_place). */
typedef struct {
    Hit *hits;      /* retrieved, grade > 0: the DCG gains */
    int64_t *rel;   /* ranks of the retrieved relevant docs */
    double *ideal;  /* every grade > 0 */
    double *idcg, *dcg, *ap;
    int64_t *counts; /* relevant ranks <= k, per k */
    int64_t *judged; /* judged ranks <= k, counted at the first k >= the rank */
    int64_t n_rel, n_rel_hits, n_hits, n_ideal;
} Tally;

/* Bytes tally_place needs for nj judgements and nk cut-offs (a multiple of 8). */
static inline size_t
tally_bytes(int64_t nj, Py_ssize_t nk)
{
    return (size_t)nj * sizeof(Hit) + (size_t)(nj + 2 * nk) * sizeof(int64_t) +
           (size_t)(4 * (nj + 1)) * sizeof(double);
}

/* Lay a tally out in mem (8-byte aligned, tally_bytes(nj, nk) of it). */
static inline void
tally_place(Tally *t, void *mem, int64_t nj, Py_ssize_t nk)
{
    t->hits = (Hit *)mem;
    t->rel = (int64_t *)(t->hits + nj);
    t->counts = t->rel + nj;
    t->judged = t->counts + nk;
    t->ideal = (double *)(t->judged + nk);
    t->idcg = t->ideal + (nj + 1);
    t->dcg = t->idcg + (nj + 1);
    t->ap = t->dcg + (nj + 1);
}

static inline void
tally_start(Tally *t, Py_ssize_t nk)
{
    memset(t->judged, 0, (size_t)nk * sizeof(int64_t));
    t->n_rel = t->n_rel_hits = t->n_hits = t->n_ideal = 0;
}

/* Whether a judgement of grade g changes anything but judged@k. */
static inline int
tally_counts(const Options *o, double g)
{
    return g > 0 || (o->has_level && g >= o->level);
}

/* Add one judgement: grade g of the doc at 1-based rank r (0: not retrieved). */
static inline void
tally_add(const Options *o, Tally *t, double g, int64_t r)
{
    int positive = g > 0;
    int relevant = o->has_level ? g >= o->level : positive;
    if (r && r <= o->ks[o->nk - 1]) { /* counted at the first k >= r */
        Py_ssize_t lo = 0, hi = o->nk - 1;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (o->ks[mid] >= r) {
                hi = mid;
            }
            else {
                lo = mid + 1;
            }
        }
        t->judged[lo]++;
    }
    if (relevant) {
        t->n_rel++;
        if (r) {
            t->rel[t->n_rel_hits++] = r;
        }
    }
    if (positive) {
        t->ideal[t->n_ideal++] = g;
        if (r) {
            t->hits[t->n_hits].rank = r;
            t->hits[t->n_hits].grade = g;
            t->n_hits++;
        }
    }
}

/* Make the table cover ranks up to n; 0 on success, -1 (MemoryError set) on failure. */
static inline int
log2_grow(Log2Table *lt, int64_t n)
{
    if (n < lt->size) {
        return 0;
    }
    int64_t size = lt->size ? 2 * lt->size : 1025;
    while (size <= n) {
        size *= 2;
    }
    double *v = PyMem_Realloc(lt->v, (size_t)size * sizeof(double));
    if (v == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (lt->size == 0) {
        v[0] = 0.0;
        lt->size = 1;
    }
    for (int64_t r = lt->size; r < size; r++) {
        v[r] = log2((double)(r + 1));
    }
    lt->v = v;
    lt->size = size;
    return 0;
}

static inline int
kv_cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static inline int
kv_cmp_hit(const void *a, const void *b)
{
    int64_t x = ((const Hit *)a)->rank, y = ((const Hit *)b)->rank;
    return (x > y) - (x < y);
}

static inline int
kv_cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b; /* never NaN: grades are > 0 */
    return (x < y) - (x > y);
}

/* Ascending ranks (insertion sort for the usual handful). */
static inline void
sort_ranks(int64_t *v, int64_t n)
{
    if (n > 16) {
        qsort(v, (size_t)n, sizeof(int64_t), kv_cmp_i64);
        return;
    }
    for (int64_t i = 1; i < n; i++) {
        int64_t x = v[i], j = i;
        for (; j > 0 && v[j - 1] > x; j--) {
            v[j] = v[j - 1];
        }
        v[j] = x;
    }
}

static inline void
sort_hits(Hit *v, int64_t n)
{
    if (n > 16) {
        qsort(v, (size_t)n, sizeof(Hit), kv_cmp_hit);
        return;
    }
    for (int64_t i = 1; i < n; i++) {
        Hit x = v[i];
        int64_t j = i;
        for (; j > 0 && v[j - 1].rank > x.rank; j--) {
            v[j] = v[j - 1];
        }
        v[j] = x;
    }
}

/* Descending grades (the ideal ranking). */
static inline void
sort_desc(double *v, int64_t n)
{
    if (n > 16) {
        qsort(v, (size_t)n, sizeof(double), kv_cmp_desc);
        return;
    }
    for (int64_t i = 1; i < n; i++) {
        double x = v[i];
        int64_t j = i;
        for (; j > 0 && v[j - 1] < x; j--) {
            v[j] = v[j - 1];
        }
        v[j] = x;
    }
}

/* The ideal and the ranking's DCG prefix sums (hits sorted by rank on the way); the cut of
 * the ideal (min(positive grades, the largest k)) or -1 (MemoryError set). */
static inline int64_t
tally_dcg(const Options *o, Tally *t, Log2Table *lt)
{
    int64_t kmax = o->ks[o->nk - 1], n_hits = t->n_hits;
    Hit *hits = t->hits;
    sort_hits(hits, n_hits);
    sort_desc(t->ideal, t->n_ideal);
    int64_t last = t->n_ideal < kmax ? t->n_ideal : kmax;
    int64_t top = hits[n_hits - 1].rank > last ? hits[n_hits - 1].rank : last;
    if (log2_grow(lt, top) < 0) {
        return -1;
    }
    const double *log2s = lt->v;
    double acc = 0.0;
    t->idcg[0] = 0.0;
    for (int64_t i = 1; i <= last; i++) {
        acc += t->ideal[i - 1] / log2s[i];
        t->idcg[i] = acc;
    }
    acc = 0.0;
    t->dcg[0] = 0.0;
    for (int64_t j = 0; j < n_hits; j++) {
        acc += hits[j].grade / log2s[hits[j].rank];
        t->dcg[j + 1] = acc;
    }
    return last;
}

/* The values of a scored query (n_rel > 0) whose ranking holds n docs, in result_keys order,
 * into out: how many, or -1 (MemoryError set). */
static inline Py_ssize_t
tally_values(const Options *o, Tally *t, int64_t n, Log2Table *lt, double *out)
{
    const int64_t *ks = o->ks;
    Py_ssize_t nk = o->nk;
    int64_t *rel = t->rel, *counts = t->counts, n_rel_hits = t->n_rel_hits;
    double n_rel = (double)t->n_rel;
    sort_ranks(rel, n_rel_hits);
    for (Py_ssize_t i = 0, c = 0; i < nk; i++) {
        while (c < n_rel_hits && rel[c] <= ks[i]) {
            c++;
        }
        counts[i] = c;
    }
    int have_ap = 0;
    int64_t last = -1; /* the ideal's cut, once the DCG sums are made */
    Py_ssize_t nv = 0;
    for (Py_ssize_t ci = 0; ci < o->nc; ci++) {
        switch (o->codes[ci]) {
        case PRECISION:
            for (Py_ssize_t i = 0; i < nk; i++) {
                out[nv++] = (double)counts[i] / (double)ks[i];
            }
            break;
        case RECALL:
            for (Py_ssize_t i = 0; i < nk; i++) {
                out[nv++] = (double)counts[i] / n_rel;
            }
            break;
        case HIT_RATE:
            for (Py_ssize_t i = 0; i < nk; i++) {
                out[nv++] = counts[i] ? 1.0 : 0.0;
            }
            break;
        case MRR: {
            double rr = n_rel_hits ? 1.0 / (double)rel[0] : 0.0;
            for (Py_ssize_t i = 0; i < nk; i++) {
                out[nv++] = counts[i] ? rr : 0.0;
            }
            out[nv++] = rr;
            break;
        }
        case JUDGED: /* judged docs in the top min(k, n), over min(k, n); 0 for nothing */
            for (Py_ssize_t i = 0, c = 0; i < nk; i++) {
                c += t->judged[i];
                int64_t top = ks[i] < n ? ks[i] : n;
                out[nv++] = top ? (double)c / (double)top : 0.0;
            }
            break;
        case MAP:
            if (!have_ap) { /* ap[c]: sum of (relevant so far / rank) over the first c hits */
                double acc = 0.0;
                t->ap[0] = 0.0;
                for (int64_t j = 0; j < n_rel_hits; j++) {
                    acc += (double)(j + 1) / (double)rel[j];
                    t->ap[j + 1] = acc;
                }
                have_ap = 1;
            }
            for (Py_ssize_t i = 0; i < nk; i++) {
                out[nv++] = t->ap[counts[i]] / n_rel;
            }
            out[nv++] = t->ap[n_rel_hits] / n_rel;
            break;
        default: /* NDCG */
            if (t->n_hits == 0) {
                for (Py_ssize_t i = 0; i < nk; i++) {
                    out[nv++] = 0.0;
                }
                break;
            }
            if (last < 0 && (last = tally_dcg(o, t, lt)) < 0) {
                return -1;
            }
            for (Py_ssize_t i = 0, c = 0; i < nk; i++) {
                if (o->has_level) { /* gains within k; without a level they are the counts */
                    while (c < t->n_hits && t->hits[c].rank <= ks[i]) {
                        c++;
                    }
                }
                else {
                    c = counts[i];
                }
                out[nv++] = t->dcg[c] / t->idcg[ks[i] < last ? ks[i] : last];
            }
        }
    }
    return nv;
}

#endif /* RAGMETER_KVALUES_H */
