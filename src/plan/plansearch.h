/*
 * plansearch.h - the search check of `mess plan`: how much of the exact
 * per-shard top-P the server's HNSW actually returns on the client's data.
 * Internal header.
 *
 * The correctness model (Proposition 4.1, Appendix B, planner.c) assumes
 * every shard returns its exact top-P by perturbed Hamming distance.  The
 * server searches an HNSW graph with beam ef = max(P, ef_search), which on
 * some data (sentence embeddings: many near-equidistant codes, a poorly
 * navigable graph) misses a part of that top-P at small P, so the model is
 * optimistic there.  This module rebuilds a few shards locally, as the
 * server would hold them, and measures the miss.
 */
#ifndef MESS_PLANSEARCH_H
#define MESS_PLANSEARCH_H

#include "internal.h"

struct plan_search_in {
    const mess_params *p;   /* kappa, t, M, p_D, p_PRR, p_IRR, hnsw_m, efConstruction */
    uint32_t ef_search;     /* the server's beam floor: ef = max(P, ef_search) */
    uint32_t nshards;       /* shards simulated, 1..M */
    const uint32_t *shard;  /* their indices in 0..M-1 */
    const uint64_t *codes;  /* n x nshards x words: clean codes, shard j at j */
    size_t n;
    const uint64_t *qcodes; /* nq x M x words: clean query codes (all shards) */
    size_t nq;              /* queries simulated */
    const uint32_t *truth;  /* nq x k indices into the n items */
    size_t k;
    const double *bud;      /* distinct per-shard budgets P, ascending */
    size_t nbud;
};

/* eff[b] = Pr[HNSW returns a true top-k item | it is in the shard's exact
 * top-bud[b] by perturbed distance], pooled over the simulated shards,
 * queries and targets (1 where no target is in the exact top-P).
 * Each simulated shard holds round(n t / M) items: every target of the
 * queries plus a uniform sample of the others, storage-perturbed with p_D;
 * each query code is perturbed with p_q; graphs use the server's HNSW
 * parameters and level seeds.  The coins come from a fixed local seed (the
 * check is repeatable and nothing leaves the client).  *examined gets the
 * number of (query, target, shard) triples seen. */
int plan_search_efficiency(const struct plan_search_in *in, unsigned threads,
                           double *eff, size_t *examined);

#endif
