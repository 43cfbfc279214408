/*
 * mess.h - libmess public interface.
 *
 * libmess implements MESS: private nearest-neighbour search over embeddings
 * outsourced to an untrusted server.  The client (data owner) keeps every
 * secret; the server stores M HNSW graphs over randomized-response perturbed
 * IsoHash codes plus AEAD-encrypted payloads and answers a query in one
 * round.  Both roles live in this one library and exchange plain byte
 * buffers; nothing here opens a socket.
 *
 * Conventions
 *   - Every function that can fail returns an int: 0 (MESS_OK) on success,
 *     a negative MESS_E* code otherwise.  mess_strerror() names the code.
 *   - Handles are opaque, created by mess_*_new / *_load and released by
 *     the matching *_free, which accepts NULL.
 *   - Sizes are explicit size_t; no function reads past a length it was given.
 *   - The library never prints, never exits, and keeps no global state
 *     besides libsodium's one-time initialisation.
 *   - All multi-byte values in buffers and files are little-endian.
 *   - A call that fails, MESS_ENOMEM included, leaves the client or server
 *     it was given as it was and frees what it allocated; its pointer
 *     outputs are NULL (tests/test_oom.c fails every allocation in turn).
 *
 * This is the only public header.  Internal headers are not installed.
 */
#ifndef MESS_H
#define MESS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MESS_VERSION_MAJOR 0
#define MESS_VERSION_MINOR 1
#define MESS_VERSION_PATCH 0
#define MESS_VERSION_STRING "0.1.0"

/* Returns MESS_VERSION_STRING of the library actually linked. */
const char *mess_version(void);

/* ------------------------------------------------------------------------
 * Status codes
 * ---------------------------------------------------------------------- */
#define MESS_OK          0
#define MESS_EINVAL    (-1)  /* invalid argument (NULL, zero size, out of range) */
#define MESS_ENOMEM    (-2)  /* out of memory */
#define MESS_EIO       (-3)  /* file could not be opened, read, written or synced;
                                errno is left as the system call set it */
#define MESS_EFORMAT   (-4)  /* malformed, truncated or corrupted input */
#define MESS_EVERSION  (-5)  /* input written by an unsupported format version */
#define MESS_EPARAM    (-6)  /* input made for other public parameters */
#define MESS_EAUTH     (-7)  /* authentication failed (tampered data, wrong key) */
#define MESS_ENOTFOUND (-8)  /* no such item / label */
#define MESS_ELIMIT    (-9)  /* a documented size limit would be exceeded */
#define MESS_ENUMERIC (-10)  /* numerical routine failed (LAPACK, no convergence) */
#define MESS_EROLE    (-11)  /* a client file given where a server file is expected, or vice versa */
#define MESS_ECRYPTO  (-12)  /* the crypto library could not be initialised */
#define MESS_EPASS    (-13)  /* passphrase required, wrong, or given for an unsealed client file */
#define MESS_ESTATE   (-14)  /* operation not valid in the object's current state */
#define MESS_EOWNER   (-15)  /* the server belongs to another client (owner tag differs) */

/* A short English description of a status code; never NULL. */
const char *mess_strerror(int code);

/* ------------------------------------------------------------------------
 * Vector files (TEXMEX formats)
 *
 * .fvecs: per record, int32 dim then dim float32.
 * .ivecs: per record, int32 dim then dim int32.
 * .bvecs: per record, int32 dim then dim uint8.
 * .u64vecs: per record, int32 dim then dim uint64 (ids of any size; the
 *   files `mess query --out` writes when ids reach 2^31).
 * All little-endian.  A failure of the system (open, read, write, rename)
 * is MESS_EIO with errno as the system left it (EISDIR for a directory).
 * Every record of a file must have the same dim (1..MESS_MAX_DIM), and the
 * file size must be a whole number of records; otherwise MESS_EFORMAT.
 * Arrays returned are row-major n x dim, allocated with malloc; release them
 * with mess_vecs_free().
 * ---------------------------------------------------------------------- */
#define MESS_MAX_DIM 65536

/* Reads .fvecs or .bvecs (chosen by the file name's extension) as float32. */
int mess_vecs_read_f32(const char *path, float **out, size_t *n, size_t *dim);
int mess_fvecs_read(const char *path, float **out, size_t *n, size_t *dim);
int mess_bvecs_read(const char *path, uint8_t **out, size_t *n, size_t *dim);
int mess_ivecs_read(const char *path, int32_t **out, size_t *n, size_t *dim);
int mess_fvecs_write(const char *path, const float *v, size_t n, size_t dim);
int mess_bvecs_write(const char *path, const uint8_t *v, size_t n, size_t dim);
int mess_ivecs_write(const char *path, const int32_t *v, size_t n, size_t dim);
int mess_u64vecs_read(const char *path, uint64_t **out, size_t *n, size_t *dim);
int mess_u64vecs_write(const char *path, const uint64_t *v, size_t n, size_t dim);
void mess_vecs_free(void *p);

/* ------------------------------------------------------------------------
 * Public parameters
 *
 * Everything the server may know.  The client and the server are created
 * from the same parameters; every buffer and file carries a fingerprint of
 * them, and a mismatch is MESS_EPARAM.  Two fields are tuning, not protocol
 * identity, and are left out of the fingerprint: ef_search (the server's
 * search beam, mess_server_set_ef_search) and train_sample (used once, when
 * the client trains its hashes), so either may differ between a client and
 * its server.
 * ---------------------------------------------------------------------- */
#define MESS_METRIC_L2      0  /* squared Euclidean distance, smaller is closer */
#define MESS_METRIC_IP      1  /* inner product, reported as -<q,x> */
#define MESS_METRIC_COSINE  2  /* 1 - cosine similarity */

#define MESS_PAYLOAD_F32    0  /* vector as float32 (exact rerank) */
#define MESS_PAYLOAD_F16    1  /* IEEE half precision, round to nearest even */
#define MESS_PAYLOAD_I8     2  /* per-vector offset and step (float32) + 8-bit codes;
                                  exact for integer vectors of range <= 255 */

/* Documented limits; larger values are MESS_ELIMIT. */
#define MESS_MAX_SHARDS     1024
#define MESS_MAX_BITS       4096       /* kappa */
#define MESS_MAX_BUDGET     65535      /* per-shard candidate budget */
#define MESS_MAX_HNSW_M     256
#define MESS_MAX_EF         65535

typedef struct mess_params {
    uint32_t dim;             /* embedding dimension, 1..MESS_MAX_DIM */
    uint32_t metric;          /* MESS_METRIC_* used by the client's rerank */
    uint32_t kappa;           /* bits per shard code; multiple of 64 (> dim:
                                 stacked IsoHash blocks, docs/ENCODING.md) */
    uint32_t shards;          /* M: number of HNSW graphs */
    uint32_t per_item;        /* t: shards each item is stored in, 1..M */
    double   p_store;         /* p_D: storage-side flip probability, [0, 1/2] */
    double   p_prr;           /* permanent (per logical query) flip probability */
    double   p_irr;           /* instantaneous query flip probability */
    uint32_t hnsw_m;          /* M_hnsw: links per node (2*M_hnsw at layer 0) */
    uint32_t ef_construction; /* HNSW build beam width */
    uint32_t ef_search;       /* per-shard search beam: ef = max(budget, ef_search);
                                 server-side tuning, not fingerprinted */
    uint32_t payload;         /* MESS_PAYLOAD_* */
    uint32_t train_sample;    /* IsoHash subsample per shard; 0 = min(n, 20000);
                                 client-side, not fingerprinted */
} mess_params;

/* Fills the paper's defaults for vectors of `dim` components: M = 64, t = 16,
 * kappa = 128 (at every dim: below 128 the hash stacks blocks), p_D = 0.08,
 * p_PRR = p_IRR = 0.0417424 (effective query flip 0.08), M_hnsw = 16,
 * efConstruction = 300, ef_search = 0, f32 payloads, L2 metric. */
void mess_params_default(mess_params *p, uint32_t dim);

/* MESS_OK if the parameters are usable, else MESS_EINVAL / MESS_ELIMIT. */
int mess_params_check(const mess_params *p);

/* p_q = a(1-b) + b(1-a): the effective flip of PRR a followed by IRR b. */
double mess_effective_flip(double p_prr, double p_irr);

/* The PRR = IRR probability whose composition flips with probability p_q. */
double mess_split_flip(double p_q);

/* ------------------------------------------------------------------------
 * Roles
 * ---------------------------------------------------------------------- */
typedef struct mess_client mess_client;  /* secret: keys, hashes, generation map */
typedef struct mess_server mess_server;  /* untrusted: graphs and ciphertexts */
typedef struct mess_query  mess_query;   /* client-side state of one query */

/* Threads: the contract of each handle.
 *
 * mess_client: safe to share between threads.  Every call may be made from
 *   several threads at once, except mess_client_free (no other call on the
 *   handle may be running or start).  upload, delete, request and the two
 *   setters change the handle's state (operation counter,
 *   generation map, settings) and hold its lock for writing for the whole
 *   call, so they run one at a time, each seeing the others whole; finish
 *   and save only read that state and hold the lock for reading, so they
 *   overlap each other (a finish waits only while one of the former runs);
 *   params, codes, owner and is_deterministic read only what never
 *   changes.  Deterministic mode draws coins from the operation
 *   counter: runs repeat only when the calls reach the lock in the same
 *   order (one thread, or an order the caller imposes).
 *   tests/test_client_threads.c drives one client from four threads under
 *   ThreadSanitizer (make tsan).
 * mess_server: searches may run from many threads at once, together with
 *   the calls that only read (params, owner, check_owner, stats, save, the
 *   server view).  apply_upload, apply_delete, compact and set_ef_search
 *   change the index: no other call on the same server may overlap them
 *   (a readers-writer lock in the caller: searches share, changes are
 *   exclusive).
 * mess_query: made by one client's request, finished with that client
 *   (another client's keys make every entry fail: MESS_EAUTH).  finish
 *   does not change it, so it may be finished any number of times (the
 *   same result for the same response), also from several threads; it
 *   must be released with mess_query_free, after its last finish.
 * mess_account_pld: immutable once built; any number of threads may query
 *   one.  Everything else in this header is a pure function or works on
 *   caller-owned memory only.
 */

/* Creates a client: trains the per-shard IsoHash on `train` (n x dim floats,
 * row-major) and draws a 32-byte master key from which the shard AEAD keys,
 * label keys, route key, PRR key and storage-coin key are derived.
 *
 * The training set is separate from the indexed data on purpose: the privacy
 * analysis treats the hash as fixed, i.e. trained on public data or data
 * excluded from the protected set (paper section 5.2.1).
 *
 * seed: NULL for production (all keys and coins from the OS CSPRNG), or 32
 *       bytes for deterministic experiment mode: keys, hash training and
 *       every randomized-response coin follow from the seed, so runs repeat.
 *       Keep the seed as secret as the master key.
 * threads: worker threads for training (0 = 1).
 * (This took a memo_capacity argument until the PRR memo cache went:
 * the permanent report is now a PRF of the query; see
 * mess_client_request.) */
int mess_client_new(const mess_params *p, const float *train, size_t n,
                    const uint8_t *seed, unsigned threads, mess_client **out);
void mess_client_free(mess_client *c);
int mess_client_params(const mess_client *c, mess_params *out);
/* 1 if the client was created from a seed (deterministic experiment mode),
 * 0 for production clients and for NULL. */
int mess_client_is_deterministic(const mess_client *c);

/* The clean (unperturbed) codes of vector x for every shard: M codes of
 * kappa/64 words, bit i of shard j in word i/64 at position i%64.  Secret:
 * for the client's own analysis (accountants, planning), never to be sent. */
int mess_client_codes(const mess_client *c, const float *x, uint64_t *codes);

/* Creates an empty server for the given public parameters. */
int mess_server_new(const mess_params *p, mess_server **out);
void mess_server_free(mess_server *s);
int mess_server_params(const mess_server *s, mess_params *out);

/* Sets the server's per-shard search beam: each shard is searched with
 * ef = max(budget, ef_search).  0 .. MESS_MAX_EF (larger is MESS_ELIMIT);
 * 0, the default, searches with the request's budget alone.  A larger beam
 * finds more of the true Hamming neighbours at proportionally more
 * distance computations.  Not part of the parameter fingerprint: clients
 * made with another ef_search are served.  Saved with the server (its
 * parameter block) and reported by mess_server_params.  Not to be called
 * while a search runs on the same server (it changes what searches read). */
int mess_server_set_ef_search(mess_server *s, uint32_t ef_search);

/* ------------------------------------------------------------------------
 * Owner tag
 *
 * Every upload, delete and request buffer carries the client's owner tag:
 * 16 bytes of BLAKE2b keyed by a subkey of the master key (crypto_kdf
 * context "MESSownr"), a PRF output of a fixed input, so it tells nothing
 * about any key.  A server records the tag of the first upload it applies
 * (kept in its state file) and from then on refuses buffers carrying
 * another tag with MESS_EOWNER, before changing or searching anything.
 * A client can read the server's tag and compare it with its own before it
 * uploads or queries.
 *
 * The tag binds honest clients to their server and lets the owner tell a
 * foreign server from a tampered one; it is not a secret from the server
 * (it is in every buffer), so it does not stop a party that has seen the
 * owner's buffers from forging the tag; the payload AEAD is what keeps
 * forged entries out of the owner's results.
 * ---------------------------------------------------------------------- */
#define MESS_OWNER_BYTES 16

/* The client's owner tag. */
int mess_client_owner(const mess_client *c, uint8_t tag[MESS_OWNER_BYTES]);

/* The server's owner tag: MESS_OK with *tag filled, or MESS_ENOTFOUND for a
 * server that has applied no upload yet (any client may become its owner). */
int mess_server_owner(const mess_server *s, uint8_t tag[MESS_OWNER_BYTES]);

/* MESS_OK if a client with this tag may use the server (its owner, or any
 * client while the server has no owner), else MESS_EOWNER. */
int mess_server_check_owner(const mess_server *s,
                            const uint8_t tag[MESS_OWNER_BYTES]);

/* ------------------------------------------------------------------------
 * Insert and delete
 *
 * The client encodes, the server applies.  Buffers are malloc'd by the
 * library; release them with mess_buf_free().
 * ---------------------------------------------------------------------- */

/* Encodes n items (ids[i], vectors[i*dim ..]) into an upload buffer: for each
 * item its t shards from Route(id), and per shard a 128-bit label, a
 * perturbed code and a ciphertext of id || vector.  Ids must be distinct
 * within the call, and every vector component finite (a NaN or an
 * infinity is MESS_EINVAL, as in mess_client_request).  threads: 0 = 1.
 *
 * Generations: an id the client deleted (mess_client_delete) is uploaded
 * at its next generation, under labels and ciphertexts unrelated to the
 * previous ones; the client remembers the generation of every id it ever
 * deleted, so save the client after an upload or a delete.  The storage
 * coins are a keyed PRF of (shard, id): encoding the same (id, vector)
 * again gives byte-identical records, and an update to another vector
 * flips the clean bits it shares with the old one exactly as before, so
 * re-insertions give the server no fresh samples to average
 * (docs/PRIVACY.md, "What the server learns"). */
int mess_client_upload(mess_client *c, const uint64_t *ids,
                       const float *vectors, size_t n, unsigned threads,
                       uint8_t **buf, size_t *len);

/* Applies an upload buffer.  All or nothing: the buffer is validated in full
 * and every allocation the inserts need is made before any index changes;
 * an id already stored is MESS_EINVAL; a buffer whose owner tag is not the
 * server's owner's is MESS_EOWNER.  The first upload applied makes its
 * client the server's owner. */
int mess_server_apply_upload(mess_server *s, const uint8_t *buf, size_t len,
                             unsigned threads);

/* Encodes the (shard, label) pairs that remove the given ids (their
 * current generation) and records them as deleted in the client: deleting
 * again resends the same pairs, inserting again moves to a new generation.
 * All or nothing: on error neither a buffer nor a change to the client. */
int mess_client_delete(mess_client *c, const uint64_t *ids, size_t n,
                       uint8_t **buf, size_t *len);

/* Marks the entries named in a delete buffer deleted (they still route but
 * are never returned).  *missing (may be NULL) counts pairs not found.
 * A buffer from a client other than the server's owner is MESS_EOWNER. */
int mess_server_apply_delete(mess_server *s, const uint8_t *buf, size_t len,
                             size_t *missing);

/* Rebuilds every shard without its deleted entries.  All or nothing: the
 * new shards are built aside and replace the old ones once all exist. */
int mess_server_compact(mess_server *s, unsigned threads);

/* Exact buffer sizes for the parameters (communication figures). */
size_t mess_upload_size(const mess_params *p, size_t items);
size_t mess_delete_size(const mess_params *p, size_t items);
size_t mess_request_size(const mess_params *p);
size_t mess_response_size(const mess_params *p, size_t pool);
size_t mess_payload_size(const mess_params *p); /* one ciphertext entry */

void mess_buf_free(uint8_t *buf);

/* ------------------------------------------------------------------------
 * Query: request (client) -> search (server) -> finish (client)
 * ---------------------------------------------------------------------- */

/* Builds a request for query q (dim floats) with total candidate pool B =
 * `pool` (split as evenly as possible over the M shards).  The M codes are
 * the permanent report of q (flips p_PRR) with fresh instantaneous flips
 * (p_IRR); nothing in the request is derived from the clean query
 * otherwise.  The permanent report is a keyed PRF of q (the exact floats,
 * -0 as +0): the same query always gets the same one, whether or not an
 * earlier request failed or the client was saved since, so retries after a
 * failure redraw only the instantaneous flips (RAPPOR's memoisation with
 * nothing stored).  Deterministic mode: the instantaneous flips, request
 * id and pool rotation follow the operation counter, which a request
 * advances; save the client after requests or two runs repeat them.
 * *q_out keeps what finish() needs. */
int mess_client_request(mess_client *c, const float *q, size_t pool,
                        mess_query **q_out, uint8_t **req, size_t *req_len);

/* Searches every shard for its budget of nearest perturbed codes and returns
 * the ciphertexts.  A request from a client other than the server's owner
 * is MESS_EOWNER.  Safe to call from many threads on one server.
 * threads: workers for the fan-out over shards (0 = 1). */
int mess_server_search(const mess_server *s, const uint8_t *req,
                       size_t req_len, unsigned threads, uint8_t **resp,
                       size_t *resp_len);

typedef struct mess_finish_stats {
    size_t candidates;     /* entries in the response */
    size_t unique;         /* distinct authenticated ids among them */
    size_t auth_failures;  /* opened entries rejected by AEAD (dropped) */
    size_t unopened;       /* further copies of an id already authenticated,
                              not opened (0 with verify-all) */
} mess_finish_stats;

/* Worker threads mess_client_finish uses to open response entries (default
 * 1; 0 means 1).  A property of this handle only, not saved with it. */
int mess_client_set_threads(mess_client *c, unsigned threads);

/* Whether mess_client_finish authenticates every entry of a response
 * (on != 0) or, the default, one authentic copy per id.  The results are
 * the same either way: each entry's id is read first without
 * authentication, and for every id the copies are opened in response order
 * until one authenticates, which is the copy an open-everything pass would
 * use.  Verify-all only makes auth_failures count tampered redundant copies
 * too (an audit of the server), at about twice the cost of the default at
 * t = 16.  A property of this handle only, not saved with it. */
int mess_client_set_verify_all(mess_client *c, int on);

/* Decrypts the response, drops and counts entries failing authentication,
 * dedupes by id (see mess_client_set_verify_all), reranks exactly and writes up to k results (ascending
 * distance, ties by id) to ids/dists; *n_out is how many.  A response that
 * is not for this query's request is MESS_EAUTH; a response in which every
 * entry failed authentication returns MESS_EAUTH too (with stats filled). */
int mess_client_finish(const mess_client *c, const mess_query *q,
                       const uint8_t *resp, size_t resp_len, size_t k,
                       uint64_t *ids, float *dists, size_t *n_out,
                       mess_finish_stats *stats);
void mess_query_free(mess_query *q);

/* ------------------------------------------------------------------------
 * State files
 *
 * Header with magic, role, version and public parameters, zstd-compressed
 * body, BLAKE2b checksum; written to a new PATH.tmp.XXXXXX (mkstemp, so a
 * symlink planted next to PATH is never followed), fsync'd, renamed over
 * PATH and the directory fsync'd, so a crash leaves the old file or the new
 * one.  MESS_EIO leaves errno as the failing system call set it.  The
 * client file is mode 0600 and, with a passphrase, sealed (Argon2id key,
 * XChaCha20-Poly1305).
 *
 * passphrase: NULL for an unsealed client file, else a NUL-terminated
 * string; the _pass variants take (pointer, length), so a passphrase may
 * hold any bytes, NUL included.  An empty passphrase is MESS_EINVAL.
 * Loading with a passphrase refuses an unsealed file (MESS_EPASS): whoever
 * can write the file could otherwise plant a client with keys they know.
 * Loading a sealed file without one, or with a wrong one, is MESS_EPASS.
 * ---------------------------------------------------------------------- */
int mess_client_save(const mess_client *c, const char *path,
                     const char *passphrase);
int mess_client_load(const char *path, const char *passphrase,
                     mess_client **out);
/* The state-file container version this build writes and reads; files of
 * any other version are MESS_EVERSION.  mess_state_file_peek reads only a
 * state file's unauthenticated header (no passphrase needed): its container
 * version, role (1 client, 2 server) and whether it is sealed; MESS_EFORMAT
 * if it is not a state file.  For messages ("version 1 found, version 2
 * expected") and for telling a sealed client file from an unsealed one. */
#define MESS_STATE_FILE_VERSION 2
int mess_state_file_peek(const char *path, uint32_t *version, uint32_t *role,
                         int *sealed);
int mess_client_save_pass(const mess_client *c, const char *path,
                          const char *passphrase, size_t passphrase_len);
int mess_client_load_pass(const char *path, const char *passphrase,
                          size_t passphrase_len, mess_client **out);
int mess_server_save(const mess_server *s, const char *path);
/* expect: NULL, or parameters the file must match (else MESS_EPARAM). */
int mess_server_load(const char *path, const mess_params *expect,
                     mess_server **out);

typedef struct mess_server_stats {
    size_t entries;        /* nodes over all shards, deleted included */
    size_t live;
    size_t deleted;
    size_t bytes;          /* memory in use: graphs, codes, ciphertexts */
    size_t min_shard, max_shard; /* live entries of the smallest / largest shard */
} mess_server_stats;
int mess_server_stats_get(const mess_server *s, mess_server_stats *out);

/* ------------------------------------------------------------------------
 * Read-only server view
 *
 * Everything the untrusted server holds, shard by shard, for leakage
 * evaluations (paper Appendix A.2) and audits: nodes numbered 0..n-1 in
 * insertion order, each with its perturbed code, opaque label, HNSW level,
 * deleted flag, links per level and ciphertext.  Nothing here is secret and
 * nothing here changes the server.  shard >= M is MESS_EINVAL; an output
 * array with room for fewer than the shard's n nodes (`cap`) is MESS_ELIMIT.
 * ---------------------------------------------------------------------- */

/* *nodes: nodes of the shard, deleted ones included. */
int mess_server_shard_nodes(const mess_server *s, uint32_t shard,
                            size_t *nodes);
/* *node: the graph's entry point; MESS_ENOTFOUND if the shard is empty. */
int mess_server_shard_entry_point(const mess_server *s, uint32_t shard,
                                  uint32_t *node);
/* Perturbed codes, kappa/64 words per node (bit layout of
 * mess_client_codes); cap counts nodes. */
int mess_server_shard_codes(const mess_server *s, uint32_t shard,
                            uint64_t *codes, size_t cap);
/* Labels, MESS_LABEL_BYTES (16) opaque bytes per node; cap counts nodes. */
#define MESS_LABEL_BYTES 16
int mess_server_shard_labels(const mess_server *s, uint32_t shard,
                             uint8_t *labels, size_t cap);
/* Top layer of each node (0 = bottom layer only). */
int mess_server_shard_levels(const mess_server *s, uint32_t shard,
                             uint32_t *levels, size_t cap);
/* 1 for a node marked deleted, else 0. */
int mess_server_shard_deleted(const mess_server *s, uint32_t shard,
                              uint8_t *deleted, size_t cap);
/* Ciphertexts, mess_payload_size() bytes per node; cap counts nodes. */
int mess_server_shard_entries(const mess_server *s, uint32_t shard,
                              uint8_t *entries, size_t cap);
/* Links of one node at one level (at most 2*M_hnsw at level 0, M_hnsw
 * above): *n is their number; MESS_EINVAL if node >= n or level exceeds the
 * node's level; MESS_ELIMIT (with *n set) if cap < *n. */
int mess_server_shard_neighbors(const mess_server *s, uint32_t shard,
                                uint32_t node, uint32_t level, uint32_t *ids,
                                size_t cap, size_t *n);
/* All links of one level in compressed-row form: node i's links are
 * ids[offsets[i] .. offsets[i+1]) (none for nodes below the level).
 * offsets has room for n_offsets >= nodes + 1 entries; *n_ids gets the
 * total, and ids (cap entries) may be NULL with cap 0 to ask for it only. */
int mess_server_shard_links(const mess_server *s, uint32_t shard,
                            uint32_t level, size_t *offsets, size_t n_offsets,
                            uint32_t *ids, size_t cap, size_t *n_ids);

/* ------------------------------------------------------------------------
 * Privacy accountants (paper section 5.2, Appendix A.1)
 *
 * Pure numerics over public flip probabilities and fixed-hash Hamming
 * distances; no handle to the protocol is needed, so a user can state what
 * the server may learn before outsourcing anything.  Privacy parameters are
 * in nats (an event's probability changes by at most a factor e^xi, plus
 * delta where one is given).  Everything is computed in log space or on
 * probabilities in [0, 1]: no overflow and no NaN for flip probabilities in
 * (0, 1/2], kappa up to MESS_MAX_BITS, M up to MESS_MAX_SHARDS and
 * repetition counts up to MESS_ACCOUNT_MAX_REPEATS.  A flip probability of
 * 0 has no finite guarantee and is MESS_EINVAL; 1/2 releases nothing (0).
 * ---------------------------------------------------------------------- */

/* Repetition counts R beyond this are MESS_ELIMIT (2^53: exact in a double). */
#define MESS_ACCOUNT_MAX_REPEATS ((uint64_t)1 << 53)
/* Smallest target delta accepted; mass dropped by truncation is below 1e-30. */
#define MESS_ACCOUNT_MIN_DELTA 1e-20
/* Route dynamic programme limits: (min(t, M-t) + 1) * (U + 1) cells, U the
 * largest aggregate distance, and cell updates (a few seconds at most);
 * MESS_ELIMIT beyond.  The paper's configuration needs 33K cells. */
#define MESS_ACCOUNT_MAX_CELLS (1u << 24)
#define MESS_ACCOUNT_MAX_WORK 4294967296.0

/* eta = ln((1 - p) / p): the per-coordinate pure XDP of randomized response
 * with flip probability p in (0, 1/2] (Proposition 5.1).  eta_D for p_D. */
int mess_account_eta(double p, double *eta);

/* Pure stored-data bound of Theorem 5.2: eta_D * D_D with D_D the sum of
 * the t largest of the m per-shard fixed-hash distances d[0..m-1] (the
 * worst t-shard route; with t = m, the realized route of the
 * identifier-fixed case).  1 <= t <= m <= MESS_MAX_SHARDS, d[s] <=
 * MESS_MAX_BITS. */
int mess_account_stored_pure(double p_store, const uint32_t *d, size_t m,
                             size_t t, double *xi);

/* Route-averaged distance distribution w(u) = Pr[sum of d over a uniform
 * t-of-m route = u] (section 5.2.2, dynamic programme of Appendix A.1.1;
 * no subset is enumerated).  Writes ln w(u) for u = 0 .. *len - 1, where
 * *len = 1 + (sum of the t largest d); -INFINITY where w(u) = 0.
 *   logw: NULL to only learn *len, else room for `cap` doubles (cap < *len
 *         is MESS_ELIMIT with *len set).
 * The programme carries probabilities (the counts of A.1.1 divided by
 * C(m, t) at every step), so nothing overflows; weights below 1e-300 may
 * underflow to 0, far below any delta this accountant accepts.  Work is
 * O(m * min(t, m-t) * U); beyond MESS_ACCOUNT_MAX_CELLS or
 * MESS_ACCOUNT_MAX_WORK, MESS_ELIMIT. */
int mess_account_route_weights(const uint32_t *d, size_t m, size_t t,
                               double *logw, size_t cap, size_t *len);

/* Exact randomized-response hockey-stick profile of Corollary 5.3 for u
 * differing coordinates with flip probability p:
 *   delta_u(eps) = sum_z C(u,z) (1-p)^z p^(u-z) [1 - e^(eps - (2z-u) eta)]_+
 * u <= MESS_MAX_SHARDS * MESS_MAX_BITS, eps >= 0.  The profile is the same in
 * both directions (randomized response is symmetric). */
int mess_account_rr_delta(double p, uint64_t u, double eps, double *delta);

/* The privacy-loss distribution of randomized response mixed over a
 * distance distribution: the route-averaged profile
 * delta(eps) = sum_u w(u) delta_u(eps) of Corollary 5.3. */
typedef struct mess_account_pld mess_account_pld;

/* Builds the mixture for flip probability p in (0, 1/2] and log-weights
 * logw[u], u = 0 .. len-1 (normalised here; -INFINITY entries are absent;
 * at least one must be finite; len - 1 <= MESS_MAX_SHARDS * MESS_MAX_BITS).
 * A point mass (identifier-fixed route) is logw[u] = 0 at one u. */
int mess_account_pld_new(double p, const double *logw, size_t len,
                         mess_account_pld **out);
void mess_account_pld_free(mess_account_pld *pld);

/* delta(eps) of the mixture for eps >= 0 (the larger of both directions). */
int mess_account_pld_delta(const mess_account_pld *pld, double eps,
                           double *delta);

/* xi(delta0) = inf { eps >= 0 : delta(eps) <= delta0 }, by bisection to
 * 1e-9 (absolute, or 1e-15 relative for large values); the value returned
 * satisfies delta(xi) <= delta0.  delta0 in [MESS_ACCOUNT_MIN_DELTA, 1). */
int mess_account_pld_epsilon(const mess_account_pld *pld, double delta0,
                             double *xi);

/* Upper-tail bound of Corollary 5.3 on the privacy loss of the released
 * index: Pr[L > eps] <= min{1, inf_{0 <= a < eps} delta(a)/(1 - e^(a-eps))}
 * (the infimum is searched numerically; every a tried gives a valid bound).
 * *exact (may be NULL) receives Pr[L > eps] of the augmented release that
 * also reveals the route, computed from the mixture directly. */
int mess_account_pld_tail(const mess_account_pld *pld, double eps,
                          double *bound, double *exact);

/* Largest and mean aggregate distance of the mixture. */
int mess_account_pld_support(const mess_account_pld *pld, uint64_t *u_max,
                             double *u_mean);

typedef struct mess_account_stored_result {
    double eta;      /* eta_D = ln((1 - p_D) / p_D) */
    uint64_t u_max;  /* D_D: sum of the t largest distances (or of all, fixed) */
    double u_mean;   /* mean aggregate distance under the route distribution */
    double xi_pure;  /* eta_D * D_D: pure XDP of Theorem 5.2 */
    double xi_pld;   /* pair-specific XDP at delta0 (Corollary 5.3) */
} mess_account_stored_result;

/* Stored-data accountant for one challenge pair with per-shard fixed-hash
 * distances d[0..m-1]:
 *   fixed = 0: uniform t-of-m route (w from mess_account_route_weights);
 *   fixed = 1: identifier-fixed route, d lists the t realized shards (t = m),
 *              w is a point mass at their sum.
 * delta0 in [MESS_ACCOUNT_MIN_DELTA, 1). */
int mess_account_stored(double p_store, const uint32_t *d, size_t m, size_t t,
                        int fixed, double delta0,
                        mess_account_stored_result *out);

/* Access-pattern parameter of Theorem 5.4 for PRR flip a and IRR flip b in
 * [0, 1/2] (not both 0) and R >= 1 submissions of one logical query:
 *   eta_R = ln(((1-a)(1-b)^R + a b^R) / (a(1-b)^R + (1-a) b^R)),
 * evaluated in closed form in log space (O(1) for any R).  The complete
 * access transcript is eta_R-XDP w.r.t. D_Q; xi_AP = eta_R * D_Q. */
int mess_account_access(double p_prr, double p_irr, uint64_t repeats,
                        double *eta_r);

/* Search-pattern parameters of Theorem 5.5: gamma_eq (same clean bit,
 * shared vs fresh permanent report) and gamma_ne (different clean bits),
 * the largest |log-likelihood ratio| between reuse and split over all
 * report sequences, by exact enumeration of the sufficient statistics
 * (ones among the first R-1 reports, last report).  For R > 2^16 only
 * the two extreme counts are evaluated: the ratio is monotone in the count
 * (it is affine in the posterior of the permanent bit), so this is exact.
 * p_prr in [0, 1/2], p_irr in (0, 1/2], R >= 1 (R = 1: gamma_eq = 0 and
 * gamma_ne = eta_1). */
int mess_account_search(double p_prr, double p_irr, uint64_t repeats,
                        double *gamma_eq, double *gamma_ne);

/* xi_SP = (K_Q - u) gamma_eq + u gamma_ne and the uniform ordinary-DP bound
 * K_Q max(gamma_eq, gamma_ne) (Theorem 5.5) for K_Q = bits contacted
 * (sum of kappa over contacted shards) and u = D_Q <= K_Q. */
int mess_account_search_xi(double p_prr, double p_irr, uint64_t repeats,
                           uint64_t bits, uint64_t distance, double *xi_sp,
                           double *xi_uniform);

/* Random-hyperplane LSH case (Appendix A.2.6 regression value): kappa bits
 * each differing independently with probability d_theta in [0, 1], flip p.
 *   *xi_mixture: exact profile mixed over u ~ Binomial(kappa, d_theta),
 *                inverted at delta0 (what this accountant computes);
 *   *xi_chernoff: eta * kappa * a*, with a* > d_theta solving
 *                kappa KL(a* || d_theta) = ln(1/delta0) (the Chernoff
 *                relative-entropy tail of the distance at delta0, then
 *                pure XDP at that distance; reproduces the paper's 20.041
 *                for p = 0.21, kappa = 128, d_theta = 0.05, delta0 = 0.01).
 * Either pointer may be NULL. */
int mess_account_random_lsh(double p, uint32_t kappa, double d_theta,
                            double delta0, double *xi_mixture,
                            double *xi_chernoff);

/* ------------------------------------------------------------------------
 * Correctness model (Proposition 4.1, Appendix B): predicted recall
 * ---------------------------------------------------------------------- */

/* p_plus = p_D (1 - p_q) + p_q (1 - p_D): storage and query flips compound. */
int mess_plan_compound_flip(double p_store, double p_query, double *p_plus);

/* Gaussian overtaking probability of Proposition 4.1: a background item at
 * clean distance d overtakes a target at clean distance d_star,
 *   Phi((d_star - d)(1 - 2 p_plus) / sqrt(2 kappa p_plus (1 - p_plus))).
 * d, d_star <= kappa; p_plus in [0, 1/2] (0: a step, 1/2 at a tie). */
int mess_plan_overtake(uint32_t kappa, double p_plus, uint32_t d_star,
                       uint32_t d, double *prob);

/* Poisson-binomial shard rank of Proposition B.1: count[d], d = 0..kappa,
 * is the number of background items (target excluded) at clean distance d
 * in the whole database; occupancy = t/M scales it to one shard.
 *   *mean = 1 + occupancy sum_d count[d] P(d),
 *   *var  = occupancy sum_d count[d] P(d) (1 - P(d)). */
int mess_plan_rank(uint32_t kappa, double p_plus, uint32_t d_star,
                   const double *count, double occupancy, double *mean,
                   double *var);

/* P_hit(P) = Phi((P + 1/2 - mean) / sqrt(var)) for a per-shard budget P
 * (continuity correction 1/2); var = 0 gives a step. */
int mess_plan_hit(double mean, double var, double budget, double *prob);

/* Aggregate recovery 1 - prod_s (1 - p_hit[s]) over an item's n shards. */
int mess_plan_recovery(const double *p_hit, size_t n, double *prob);

/* The same averaged over a uniform t-of-m route (what a planner who does
 * not fix the identifier expects): E_S[1 - prod_{s in S}(1 - p_hit[s])]. */
int mess_plan_recovery_uniform(const double *p_hit, size_t m, size_t t,
                               double *prob);

/* The conditional refinement (MESS_PLAN_CONDITIONAL below).  Proposition
 * 4.1 treats the overtaking events of one target as independent, but they
 * all compare against the same perturbed target distance X; conditioning
 * on it restores that correlation:
 *   Pr[X = x | d] = (Binomial(d, 1-p_plus) * Binomial(kappa-d, p_plus))(x)
 * (the distance law of the proof of Proposition 4.1, convolved exactly),
 * an item at clean distance d overtakes with F_d(x) = Pr[X_d < x] +
 * Pr[X_d = x]/2, and P_hit = sum_x Pr[X = x | d_star] Phi((P + 1/2 - 1 -
 * mu(x)) / sigma(x)) with mu(x), sigma(x)^2 the Poisson-binomial moments
 * of the F_d(x) (occupancy-scaled counts as in mess_plan_rank).
 * kappa <= MESS_PLAN_MAX_CONDITIONAL_BITS (tables are (kappa+1)^2). */
#define MESS_PLAN_PAPER        0  /* Proposition 4.1 / Appendix B as stated */
#define MESS_PLAN_CONDITIONAL  1  /* conditioned on the target's perturbed distance */
#define MESS_PLAN_MAX_CONDITIONAL_BITS 1024

/* pmf[x] = Pr[perturbed distance = x | clean distance d], x = 0..kappa. */
int mess_plan_distance_pmf(uint32_t kappa, double p_plus, uint32_t d,
                           double *pmf);

/* P_hit of the conditional model for one shard: count[] and occupancy as in
 * mess_plan_rank (target excluded), budget P >= 0. */
int mess_plan_hit_conditional(uint32_t kappa, double p_plus, uint32_t d_star,
                              const double *count, double occupancy,
                              double budget, double *prob);

/* Predicted Recall@k for candidate pools pools[0..npools-1] (total B split
 * over the M shards as the protocol does), from the client's own clean
 * codes: nothing here leaves the client.
 *   data:    the n x dim vectors the client stores;
 *   queries: nq x dim sample of queries;
 *   truth:   nq x k indices into data of each query's exact top-k, or NULL
 *            to compute them here with the client's metric;
 *   recall:  npools outputs, the mean over queries and targets of the
 *            aggregate recovery probability (route averaged);
 *   threads: workers (0 = 1).
 * Uses p_D, p_q = mess_effective_flip(p_PRR, p_IRR), M, t, kappa of the
 * client.  This is Proposition 4.1 / Appendix B as the paper states it;
 * it treats a target's overtaking events as independent and is strongly
 * pessimistic at small pools on the bundled SIFT set, where the
 * conditional model of mess_plan_recall_model comes close to measured
 * recall (docs/PRIVACY.md compares both). */
int mess_plan_recall(const mess_client *c, const float *data, size_t n,
                     const float *queries, size_t nq,
                     const uint32_t *truth, size_t k, const size_t *pools,
                     size_t npools, unsigned threads, double *recall);

/* The same with a choice of model: MESS_PLAN_PAPER (what mess_plan_recall
 * computes) or MESS_PLAN_CONDITIONAL (closer to measured recall; see
 * docs/PRIVACY.md). */
int mess_plan_recall_model(const mess_client *c, int model, const float *data,
                           size_t n, const float *queries, size_t nq,
                           const uint32_t *truth, size_t k, const size_t *pools,
                           size_t npools, unsigned threads, double *recall);

/* The search check.  The two models above assume each shard returns its
 * exact top-P by perturbed Hamming distance.  The server searches an HNSW
 * graph with beam ef = max(P, ef_search); where that beam is too narrow for
 * the data (sentence embeddings at small P: docs/TEXT.md) it returns less,
 * and the models are optimistic.  mess_plan_recall_search rebuilds
 * check_shards shards locally as the server would hold them (round(n t/M)
 * items: the targets of the first check_queries queries plus a uniform
 * sample, storage-perturbed; queries perturbed with p_q; the server's HNSW
 * parameters), measures per budget P the share eff(P) of targets in a
 * shard's exact top-P that the HNSW search returns (ties split as an exact
 * search would), and evaluates the model at the budget eff(P) P.  Coins
 * come from a fixed local seed (repeatable; nothing leaves the client).
 * This correction treats the search's misses as independent across shards
 * and is pessimistic where eff is far below 1 (docs/TEXT.md: on the bundled
 * SIFT set measured recall lies between the two curves).  search == NULL or
 * check_shards == 0: no check (mess_plan_recall_model). */
#define MESS_PLAN_MAX_CHECK_SHARDS 64
struct mess_plan_search {
    uint32_t ef_search;     /* the server's beam floor (its ef_search) */
    uint32_t check_shards;  /* shards rebuilt, 0..MESS_PLAN_MAX_CHECK_SHARDS
                               (more than M: M); 0 = no check */
    uint32_t check_queries; /* queries of the sample the check uses (0: 100) */
    double *eff;            /* npools: receives eff(B) (may be NULL) */
    double *recall_exact;   /* npools: receives the curve without the check
                               (exact per-shard search; may be NULL) */
};

int mess_plan_recall_search(const mess_client *c, int model, const float *data,
                            size_t n, const float *queries, size_t nq,
                            const uint32_t *truth, size_t k, const size_t *pools,
                            size_t npools, struct mess_plan_search *search,
                            unsigned threads, double *recall);

#ifdef __cplusplus
}
#endif
#endif /* MESS_H */
