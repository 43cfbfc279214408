/*
 * hnsw_bin.h - HNSW (Malkov & Yashunin 2018) over packed binary codes with
 * Hamming distance: the server's index, one per shard.  Internal header.
 *
 * Nodes are numbered 0, 1, 2, ... in insertion order.  Each carries a
 * kappa-bit code, a 128-bit label chosen by the caller (unique among live
 * nodes, compared in full) and a deleted flag: a deleted node still routes searches but is
 * never returned.  Levels follow m_L = 1/ln(M_hnsw) from a seeded generator,
 * so a build is a deterministic function of (params, insertion sequence).
 *
 * Thread safety: any number of threads may call hnsw_search on one index at
 * once, each with its own scratch; hnsw_add, hnsw_delete and every other
 * mutation need exclusive access.
 */
#ifndef MESS_HNSW_BIN_H
#define MESS_HNSW_BIN_H

#include "internal.h"

#define HNSW_MAX_LEVEL 31
#define HNSW_MAX_NODES 0xfffffff0u

struct hnsw_params {
    uint32_t bits;            /* kappa: multiple of 64, 64..MESS_MAX_BITS */
    uint32_t m;               /* M_hnsw: links per node above layer 0 (2M at 0), 2..256 */
    uint32_t ef_construction; /* beam width while inserting, >= 1 */
    uint64_t seed;            /* level generator seed (public; levels need no secrecy) */
};

struct hnsw;
struct hnsw_scratch;

/* A node's label: 128 bits, bytes 0-7 in lo and 8-15 in hi (little-endian
 * on the wire and on disk).  Two labels are equal only if both halves are. */
struct hnsw_label {
    uint64_t lo, hi;
};

static inline struct hnsw_label hnsw_label_of(uint64_t lo, uint64_t hi)
{
    struct hnsw_label l;
    l.lo = lo;
    l.hi = hi;
    return l;
}

static inline int hnsw_label_eq(struct hnsw_label a, struct hnsw_label b)
{
    return a.lo == b.lo && a.hi == b.hi;
}

struct hnsw_hit {
    uint32_t node;
    uint32_t dist;   /* Hamming distance to the query */
    struct hnsw_label label;
};

int hnsw_new(const struct hnsw_params *p, struct hnsw **out);
void hnsw_free(struct hnsw *h);
const struct hnsw_params *hnsw_get_params(const struct hnsw *h);

/* Inserts a code (bits/64 words) with a label; *node_out (may be NULL) gets
 * its node id.  MESS_EINVAL if a live node has the label already. */
int hnsw_add(struct hnsw *h, const uint64_t *code, struct hnsw_label label,
             uint32_t *node_out);

/* Makes room for n nodes in all (a bulk insert of a known size then ends
 * with no spare capacity); never shrinks.  Adds grow by 1.25x otherwise.
 * Also makes every other allocation the adds up to n nodes need (label
 * map, insert scratch, upper-layer link blocks), so after it succeeds
 * those adds cannot fail for memory: an all-or-nothing bulk insert
 * reserves first.  Changes nothing hnsw_serialize writes. */
int hnsw_reserve(struct hnsw *h, size_t n);
/* Releases the link blocks hnsw_reserve made for nodes not added (after a
 * bulk insert that gave up); the arrays keep their capacity. */
void hnsw_unreserve(struct hnsw *h);

/* Per-thread search state (visited marks, queues); grows on demand. */
int hnsw_scratch_new(struct hnsw_scratch **out);
void hnsw_scratch_free(struct hnsw_scratch *s);

/* Work of the searches (and inserts) made with a scratch since it was made
 * or the counts were reset: for the roofline of docs/PERFORMANCE.md. */
struct hnsw_counts {
    uint64_t searches;   /* hnsw_search / hnsw_search_many jobs run */
    uint64_t upper;      /* distances of the greedy descent (layers >= 1) */
    uint64_t expanded;   /* beam-search nodes whose link list was read */
    uint64_t links;      /* link ids read in those lists */
    uint64_t scored;     /* distances to unvisited neighbours (codes read) */
    uint64_t link_lines; /* 64-byte lines holding the lists' count and ids */
};
void hnsw_scratch_counts(const struct hnsw_scratch *s, struct hnsw_counts *out);
void hnsw_scratch_counts_reset(struct hnsw_scratch *s);

/* Up to P nearest non-deleted nodes to query (ascending distance, ties by
 * node id) with beam ef' = max(P, ef).  out has room for P hits. */
int hnsw_search(const struct hnsw *h, struct hnsw_scratch *s,
                const uint64_t *query, size_t P, size_t ef,
                struct hnsw_hit *out, size_t *n_out);

/* Many independent searches (any mix of indexes) interleaved on the calling
 * thread: up to `width` searches are in flight, each with its own scratch
 * (scratch[0..width-1]), and each step of one (a link list or the codes of
 * its neighbours awaited) is overlapped with steps of the others by
 * prefetching, so memory latency is paid once per round rather than once
 * per search.  Every job's hits, count and status are exactly those of
 * hnsw_search(job.h, ..., job.query, job.P, job.ef, job.out, &job.n_out).
 * width 1..HNSW_MANY_MAX.  Returns the first failed job's status (all jobs
 * are run). */
#define HNSW_MANY_MAX 16
struct hnsw_job {
    const struct hnsw *h;
    const uint64_t *query;
    size_t P, ef;
    struct hnsw_hit *out; /* room for P hits */
    int skip_labels;      /* 1: the hits' labels are left {0, 0} (not read:
                             a random line each, which the server, copying
                             entries by node, does not need) */
    size_t n_out;         /* set by the call */
    int rc;               /* set by the call */
};
/* hnsw_search_many's loops, for the tests and `mess bench server` (the same
 * results either way): fast 1 runs the common case (128-bit codes all in
 * one array, no deleted node) in loops of its own and makes the next picks
 * of all beams that scored in a round together (their link lists'
 * prefetches overlap); fast 2 also gathers the unvisited neighbours
 * without a branch on the visit bit (when the bitmap is cleared whole);
 * fast 3 (default, HNSW_MANY_FAST) also scores each gathered list at once
 * (src/index/hnsw_score.c) and updates the queues only for the neighbours
 * below the bound; 0 the former loops (fast is clamped to 0..3).  A
 * visit bitmap of at most clear_words 64-bit words (default
 * HNSW_MANY_CLEAR_WORDS: 128 KiB, 1M nodes) is cleared whole after a
 * search, a larger one (or any, with fast 0) through the list of the nodes
 * visited.  Passed to each call; NULL gives the defaults. */
#define HNSW_MANY_CLEAR_WORDS 16384
#define HNSW_MANY_FAST 3
struct hnsw_many_opts {
    int fast;
    size_t clear_words;
    int layout;  /* 1 (default): fast 3 reads a graph's code layout where
                    it has one (hnsw_layout_build); 0 never */
};
int hnsw_search_many(struct hnsw_job *jobs, size_t n,
                     struct hnsw_scratch *const *scratch, unsigned width,
                     const struct hnsw_many_opts *opts);

/* ---- the code layout (src/index/hnsw_layout.c) -------------------------
 *
 * Opt-in, in memory only (no file changes): each node's layer-0 ids and
 * its neighbours' 128-bit codes in one 64-byte-aligned block, so that
 * hnsw_search_many (fast 3, struct hnsw_many_opts's layout 1) reads a
 * node's list and every code it scores from one place: ceil((2M x 4 + 2M
 * x 16) / 64) lines (10 at M 16: 640 bytes per node) instead of the list's
 * 3 lines and one random line per unvisited neighbour.  Results and counts
 * of work are those of the graph without it.  Once built, every change to
 * the graph keeps it equal (hnsw_add, its links' shrinking, hnsw_apply_delta;
 * hnsw_delete changes no list), hnsw_compact builds it on the new graph,
 * and MESS_ENOMEM from an add may now come from its growth.
 * hnsw_layout_build makes it (again) from the graph: MESS_OK, MESS_ENOMEM
 * (then there is none), MESS_EPARAM for codes other than 128 bits (there
 * is none).  hnsw_layout_drop frees it; hnsw_layout_bytes is its size (0
 * without), also counted in hnsw_heap_bytes. */
int hnsw_layout_build(struct hnsw *h);
void hnsw_layout_drop(struct hnsw *h);
size_t hnsw_layout_bytes(const struct hnsw *h);
/* Bytes per node of the layout of a graph with parameters p (0 when it
 * cannot have one). */
size_t hnsw_layout_node_bytes(const struct hnsw_params *p);

/* MESS_OK and *node (may be NULL) if a live node has the label, else
 * MESS_ENOTFOUND. */
int hnsw_find(const struct hnsw *h, struct hnsw_label label, uint32_t *node);
/* Marks the live node with the label deleted, or MESS_ENOTFOUND. */
int hnsw_delete(struct hnsw *h, struct hnsw_label label);

/* A new index holding only the live nodes, inserted again in their original
 * order.  old_to_new (may be NULL; hnsw_count entries) maps old node ids to
 * new ones, UINT32_MAX for removed nodes. */
int hnsw_compact(const struct hnsw *h, struct hnsw **out, uint32_t *old_to_new);

size_t hnsw_count(const struct hnsw *h);   /* nodes, deleted included */
size_t hnsw_live(const struct hnsw *h);
size_t hnsw_deleted(const struct hnsw *h);
/* Memory in use: heap arrays plus, for an attached graph, the mapped file's
 * length (hnsw_heap_bytes and hnsw_mapped_bytes apart). */
size_t hnsw_bytes(const struct hnsw *h);
size_t hnsw_heap_bytes(const struct hnsw *h);
size_t hnsw_mapped_bytes(const struct hnsw *h);

/* Read access for the leakage evaluation (the graph the server sees). */
uint32_t hnsw_level(const struct hnsw *h, uint32_t node);
int hnsw_neighbors(const struct hnsw *h, uint32_t node, uint32_t level,
                   const uint32_t **ids, size_t *n);
const uint64_t *hnsw_code(const struct hnsw *h, uint32_t node);
/* The node's label; {0, 0} for node >= n. */
struct hnsw_label hnsw_label(const struct hnsw *h, uint32_t node);
int hnsw_is_deleted(const struct hnsw *h, uint32_t node);
/* Entry point node, or UINT32_MAX when empty. */
uint32_t hnsw_entry_point(const struct hnsw *h);

/* Appends the index (format in docs/HNSW.md). */
int hnsw_serialize(const struct hnsw *h, struct mess_wr *w);
/* Reads an index, validating every count, level, link and label; expect
 * (may be NULL) are parameters the index must have (else MESS_EPARAM). */
int hnsw_deserialize(struct mess_rd *r, const struct hnsw_params *expect,
                     struct hnsw **out);

/* ---- the graph file (docs/HNSW.md, "Graph file") ------------------------
 *
 * The working form of one shard's graph: a 4096-byte header page (magic,
 * format version, parameters, counts, section offsets and lengths, its own
 * BLAKE2b-256) and page-aligned sections (codes, labels, levels, deleted
 * flags, layer-0 links, upper-link offsets, upper links, label map), the
 * memory image of a little-endian host, so a mapping of the file is
 * searched in place.  Not the travel form: hnsw_serialize is unchanged. */

/* Writes the graph file of h to fd at its current position (the caller
 * fsyncs and closes); digest gets the BLAKE2b-256 of all bytes written.
 * The bytes are a function of the graph alone (the same nodes, links,
 * flags and generator state give the same file, however built or
 * attached).  MESS_EIO on a write error (the file is then partial),
 * MESS_EINVAL on a big-endian host, MESS_ELIMIT past 2^32 upper-link
 * words. */
int hnsw_write_graph(const struct hnsw *h, int fd, uint8_t digest[32]);

/* A graph over a mapping of a graph file: base (4096-aligned) and len (the
 * whole file).  O(1): checks the header page (checksum, parameters, counts,
 * that every section is where the layout puts it and inside len) and the
 * entry point's level; never reads the sections otherwise.  expect (may be
 * NULL) as for hnsw_deserialize.  The caller owns the mapping and unmaps
 * it after hnsw_free.  Attach never writes to it; hnsw_add, hnsw_delete
 * do (the links and flags of existing nodes, the label map), so map it
 * MAP_PRIVATE with PROT_READ | PROT_WRITE to mutate without touching the
 * file.  Nodes added later live on the heap.  Every operation works on an
 * attached graph and gives the results, and hnsw_serialize /
 * hnsw_write_graph bytes, a heap graph with the same history gives.  A
 * corrupted file that passes attach may give wrong answers but never a
 * crash, an out-of-bounds access or a hang; hnsw_check finds it.
 * MESS_EFORMAT / MESS_EVERSION / MESS_EPARAM on a bad header, MESS_EINVAL
 * for an unaligned base or a big-endian host.  hnsw_attach_msg also
 * writes a one-line reason into msg (cap bytes, may be NULL/0). */
int hnsw_attach(void *base, size_t len, const struct hnsw_params *expect,
                struct hnsw **out);
int hnsw_attach_msg(void *base, size_t len, const struct hnsw_params *expect,
                    struct hnsw **out, char *msg, size_t cap);

/* Full verification of any graph, O(n M): what hnsw_deserialize checks
 * (levels, exactly the entry on the top level, deleted count, link counts,
 * targets, self links, duplicates) plus the attached file's upper-link
 * offsets and the label map (every live node found under its own label,
 * nothing else in it, so live labels are unique).  MESS_EFORMAT with the
 * reason in msg (hnsw_check_msg), MESS_ENOMEM. */
int hnsw_check(const struct hnsw *h);
int hnsw_check_msg(const struct hnsw *h, char *msg, size_t cap);

/* BLAKE2b-256 of len bytes (a mapped graph file: compare with the digest
 * hnsw_write_graph returned). */
int hnsw_graph_digest(const void *base, size_t len, uint8_t digest[32]);

/* dist[i] = Hamming distance of q to code i of n (each `words` words), with
 * the POPCNT instruction when the CPU has it (hnsw_popcount_hw). */
void hnsw_hamming_many(const uint64_t *q, const uint64_t *codes, size_t n,
                       uint32_t words, uint32_t *dist);

/* dist[i] = Hamming distance of block i of a to block i of b (n blocks of
 * `words` words each: one code per shard), the same way. */
void hnsw_hamming_blocks(const uint64_t *a, const uint64_t *b, size_t n,
                         uint32_t words, uint32_t *dist);

/* 1 if searches and inserts use the POPCNT instruction (chosen at run time
 * from the CPU, not the build machine), 2 if hnsw_search_many's neighbour
 * lists are also scored with AVX2 (src/index/hnsw_score.c), 0 for the
 * baseline code. */
int hnsw_popcount_hw(void);
/* Tests and benchmarks: -1 lets the CPU decide (the default), 0 forces the
 * baseline code, 1 the instruction, 2 also AVX2 (MESS_EINVAL where the CPU
 * lacks it).
 * Not thread-safe: call before any search.  The one table of these
 * choices: SIMD_POPCOUNT in src/common/simd.h. */
int hnsw_popcount_force(int mode);

/* Hamming distance of two codes of `words` 64-bit words (the baseline
 * popcount unless the caller is compiled for the instruction). */
static inline uint32_t hnsw_hamming(const uint64_t *a, const uint64_t *b,
                                    uint32_t words)
{
    uint32_t d = 0, i;
    for (i = 0; i < words; i++)
        d += (uint32_t)__builtin_popcountll(a[i] ^ b[i]);
    return d;
}

/* ---- checkpoint deltas (docs/PROTOCOL.md "Proportional checkpoint") -----
 *
 * hnsw_track marks the graph's present state: from then on every write to
 * an existing node's link block or deleted flag is recorded (one byte per
 * node, allocated here).  hnsw_write_delta writes what changed since the
 * mark (new nodes, the changed blocks, deletions, header fields; format
 * above hnsw_track in src/index/hnsw_delta.c); hnsw_apply_delta, given a
 * graph in the mark's state (the base file attached and the earlier
 * deltas applied), brings it to the writer's state: the same nodes,
 * links, flags, entry, levels and generator, so every operation then
 * gives what the writer's graph gives.  The delta is hostile input: every
 * count, id, level, block and the digest are checked before the first
 * change (MESS_EFORMAT with a reason in msg); only MESS_ENOMEM can leave
 * the graph half changed. */
struct hnsw_delta_info {
    uint32_t shard;
    uint64_t generation, base_generation;
    uint8_t base_digest[32], prev_digest[32]; /* prev: zeros for the first */
    uint8_t digest[32];   /* hnsw_apply_delta: the digest the file must have */
    uint64_t nodes_after; /* hnsw_apply_delta: nodes after (UINT64_MAX: any) */
};
/* Starts (or restarts) the record of changes at the graph's present state.
 * MESS_ENOMEM leaves it untracked (hnsw_tracked 0: no delta possible). */
int hnsw_track(struct hnsw *h);
int hnsw_tracked(const struct hnsw *h);
/* Bytes hnsw_write_delta would write now; UINT64_MAX when untracked. */
uint64_t hnsw_delta_bytes(const struct hnsw *h);
/* Writes the delta since the mark to fd (the caller fsyncs); its digest
 * and length.  MESS_EINVAL when untracked, MESS_EIO on a write error. */
int hnsw_write_delta(const struct hnsw *h, const struct hnsw_delta_info *info, int fd,
                     uint8_t digest[32], uint64_t *bytes);
int hnsw_apply_delta(struct hnsw *h, const uint8_t *buf, size_t len,
                     const struct hnsw_delta_info *expect, char *msg, size_t cap);
/* A delta's fixed header: its first HNSW_DELTA_HEADER_BYTES bytes (hdr,
 * hdr_len of them) of a file of file_len bytes, checked without its body
 * (docs/PROTOCOL.md "Lazy apply"): magic, version, shard, generations,
 * base and previous digests, h's parameters, nodes before = `before`,
 * nodes after (expect->nodes_after), every count in range and the file
 * length the counts give.  expect->digest is not used: the body's
 * checksum is hnsw_apply_delta's.  *deleted_after (may be NULL): the
 * graph's deleted count after the delta.  MESS_EFORMAT / MESS_EVERSION
 * with the reason in msg. */
#define HNSW_DELTA_HEADER_BYTES 192
int hnsw_delta_header_check(const struct hnsw *h, const uint8_t *hdr, size_t hdr_len,
                            uint64_t file_len, uint64_t before,
                            const struct hnsw_delta_info *expect, uint64_t *deleted_after,
                            char *msg, size_t cap);

#endif
