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
 *   - The library never prints and never exits.  Its process-wide state
 *     is this list and nothing else: libsodium's one-time initialisation;
 *     the CPU's SIMD features, resolved once on first use (every code path
 *     gives the same results, only speed differs); the page-cache advice
 *     mask of mess_server_set_advice (mess_experimental.h), read by every
 *     later open and checkpoint; and a mutex that makes checkpoints of the
 *     server handles in one process take turns (the fcntl lock on S/LOCK
 *     keeps other processes out but cannot tell one process's handles
 *     apart).  Every other setting belongs to a handle.
 *   - All multi-byte values in buffers and files are little-endian.
 *   - A call that fails, MESS_ENOMEM included, leaves the client or server
 *     it was given as it was and frees what it allocated; its pointer
 *     outputs are NULL (tests/test_oom.c fails every allocation in turn).
 *   - Structs the caller allocates and the library reads or fills begin
 *     with `uint32_t size` so that they can grow without breaking callers
 *     compiled against an older header ("Growable structs" below).
 *   - Memory: output arrays are the caller's, with the room each function
 *     states (finish: k ids and k distances; codes: M * kappa/64 words;
 *     owner tags: MESS_OWNER_BYTES; seeds: MESS_SEED_BYTES).  What the
 *     library allocates belongs to the caller once returned: byte buffers
 *     (upload, delete, request, response, sealed queries) go to
 *     mess_buf_free, handles (client, server, query) to their *_free,
 *     vector arrays (mess_experimental.h) to mess_vecs_free.
 *   - Pointers to const: a call that takes `const mess_client *` (or
 *     server, query) does not change that handle; one that takes a plain
 *     pointer may (tests/contracts/const_handles.c compiles the former
 *     with const handles only).  mess_client_delete is not const: it
 *     records the deleted generation in the client.
 *   - Results that must be checked carry MESS_NODISCARD (warn_unused_result;
 *     an error under -Werror, tests/abi_contracts.sh): finish, whose
 *     MESS_EAUTH is the only sign of a forged or foreign response (its
 *     outputs are then not results), and its batch form; the calls that
 *     create a handle or a buffer (new, load, upload, delete, request,
 *     search, codes, their _into and batch forms, mess_workers_new, the
 *     query state's seal, unseal, save and load), whose outputs are NULL
 *     or unset on failure; the calls that change or
 *     persist state (apply_upload, apply_delete, compact, save), whose
 *     failure means the change did not happen (a lost client save loses
 *     the generation map); and the two answers that are their result
 *     (mess_params_check, mess_server_check_owner).  Getters, setters,
 *     sizes and frees are not marked.
 *
 * Two public headers: this one, the stable API, and mess_experimental.h
 * (vector files, server view, accountants, planner), which may change
 * between minor versions and is included explicitly.  Internal headers
 * are not installed.
 */
/*
 * Usage walkthrough
 *
 * One client and one server in one process, from parameters to results.
 * The roles exchange only the byte buffers (up, req, resp); in a real
 * deployment those cross the network and each role saves its own state.
 * The same code is examples/walkthrough.c, built by make and run by make
 * check (tests/abi_walkthrough.sh also checks that the two are equal).
 *
 * ---- walkthrough: begin ----
 * static int walkthrough(const char *dir, uint32_t dim, const float *train,
 *                        size_t n_train, const uint64_t *ids, const float *vectors,
 *                        size_t n, const float *query, uint64_t *top, size_t *found)
 * {
 *     mess_params p;
 *     mess_client *c = NULL;
 *     mess_server *s = NULL;
 *     mess_query *q = NULL;
 *     uint8_t *up = NULL, *req = NULL, *resp = NULL;
 *     size_t up_len, req_len, resp_len;
 *     float dists[10];
 *     char cpath[4096], spath[4096];
 *     int rc;
 *
 *     // 1. Public parameters, shared by both roles (the server may know them).
 *     mess_params_default(&p, dim);
 *     p.shards = 8;   // M graphs (default 64) ...
 *     p.per_item = 2; // ... each item in t of them (default 16)
 *     if ((rc = mess_params_check(&p)) != MESS_OK)
 *         return rc;
 *
 *     // 2. The client (every secret; trains its hash on public data) and
 *     //    the untrusted server.  seed NULL: keys from the OS CSPRNG.
 *     if ((rc = mess_client_new(&p, train, n_train, NULL, 1, &c)) != MESS_OK ||
 *         (rc = mess_server_new(&p, &s)) != MESS_OK)
 *         goto out;
 *
 *     // 3. Upload: the client encodes, the buffer crosses to the server,
 *     //    which applies it (all or nothing).
 *     if ((rc = mess_client_upload(c, ids, vectors, n, 1, &up, &up_len)) != MESS_OK ||
 *         (rc = mess_server_apply_upload(s, up, up_len, 1)) != MESS_OK)
 *         goto out;
 *
 *     // Save points: the client after every upload or delete (it keeps the
 *     // generation of deleted ids; a passphrase seals the file; a client made
 *     // from a seed also after each request), the server after every apply
 *     // or compact.  Both reload to the same state.
 *     snprintf(cpath, sizeof cpath, "%s/client.mess", dir);
 *     snprintf(spath, sizeof spath, "%s/server.mess", dir);
 *     if ((rc = mess_client_save(c, cpath, NULL)) != MESS_OK ||
 *         (rc = mess_server_save(s, spath)) != MESS_OK)
 *         goto out;
 *     mess_client_free(c);
 *     mess_server_free(s);
 *     s = NULL;
 *     if ((rc = mess_client_load(cpath, NULL, &c)) != MESS_OK ||
 *         (rc = mess_server_load(spath, &p, &s)) != MESS_OK)
 *         goto out;
 *
 *     // 4. Query: request (client) -> search (server) -> finish (client),
 *     //    a candidate pool of 64 over the M shards, the best 10 reranked.
 *     if ((rc = mess_client_request(c, query, 64, &q, &req, &req_len)) != MESS_OK ||
 *         (rc = mess_server_search(s, req, req_len, 1, &resp, &resp_len)) != MESS_OK)
 *         goto out;
 *     // MESS_EAUTH from finish: a forged or foreign response, not "no results".
 *     rc = mess_client_finish(c, q, resp, resp_len, 10, top, dists, found, NULL);
 *
 * out:
 *     // 5. Free every buffer and handle (each free accepts NULL).
 *     mess_buf_free(up);
 *     mess_buf_free(req);
 *     mess_buf_free(resp);
 *     mess_query_free(q);
 *     mess_server_free(s);
 *     mess_client_free(c);
 *     return rc;
 * }
 * ---- walkthrough: end ----
 */
#ifndef MESS_H
#define MESS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Export and contract macros
 *
 * MESS_API marks every public function: the library is built with
 * -fvisibility=hidden and a version script (libmess.map, symbol version
 * MESS_0), so libmess.so exports these and nothing else.  A program may
 * define MESS_API itself before including this header (e.g. empty).
 * MESS_NODISCARD marks calls whose result must be checked: ignoring it
 * hides a forged or failed result (the compiler warns; the conventions
 * above list them).  Both are empty for compilers without the
 * attributes.
 * ---------------------------------------------------------------------- */
#ifndef MESS_API
#  if defined(__GNUC__) && __GNUC__ >= 4
#    define MESS_API __attribute__((visibility("default")))
#  else
#    define MESS_API
#  endif
#endif
#ifndef MESS_NODISCARD
#  if defined(__GNUC__) && (__GNUC__ > 3 || (__GNUC__ == 3 && __GNUC_MINOR__ >= 4))
#    define MESS_NODISCARD __attribute__((warn_unused_result))
#  else
#    define MESS_NODISCARD
#  endif
#endif

/* ------------------------------------------------------------------------
 * Versions
 *
 * MESS_VERSION_NUMBER = major * 10000 + minor * 100 + patch.  Before 1.0 a
 * minor version may change the API and the ABI; a patch version changes
 * neither.  mess_version_number() and mess_version_string() report the
 * library actually linked: a program can compare them with the macros of
 * the header it was compiled against.
 * ---------------------------------------------------------------------- */
#define MESS_VERSION_MAJOR 0
#define MESS_VERSION_MINOR 3
#define MESS_VERSION_PATCH 0
#define MESS_VERSION_STRING "0.3.0"
#define MESS_VERSION_NUMBER (MESS_VERSION_MAJOR * 10000 + MESS_VERSION_MINOR * 100 \
                             + MESS_VERSION_PATCH)

MESS_API unsigned mess_version_number(void);
MESS_API const char *mess_version_string(void);
/* The same string as mess_version_string() (the first name it had). */
MESS_API const char *mess_version(void);

/* ------------------------------------------------------------------------
 * Status codes
 *
 * One meaning per code.  The codes that cover more than one cause, all of
 * them (the function's comment says which applies):
 *   MESS_EINVAL    a bad argument only: NULL, zero size, out of range,
 *                  non-finite vector components, a zero vector under
 *                  MESS_METRIC_COSINE (no direction: uploads and
 *                  requests), ids repeated within one call, an empty
 *                  passphrase.  Never a handle's state.
 *   MESS_ESTATE    a valid call the handle's current state refuses:
 *                  mess_server_apply_upload of an item the server already
 *                  stores (the same upload applied twice).
 *   MESS_ELIMIT    a documented limit would be exceeded, or an output array
 *                  the caller sized is too small for the answer (the
 *                  server view's and the accountant's `cap` arguments; the
 *                  count needed is returned where the function has an
 *                  output for it).
 *   MESS_EAUTH     an authentication failure: a tampered or forged entry,
 *                  a response to another request (a replay), a query or
 *                  response of another client's keys, a sealed query state
 *                  tampered with or of another client.
 *   MESS_EPASS     the passphrase: missing for a sealed client file, wrong,
 *                  or given for an unsealed one (mess_state_file_peek
 *                  tells sealed from unsealed).
 *   MESS_EFORMAT   malformed, truncated or corrupted input, a file that is
 *                  not a state file, a failed checksum.
 *   MESS_ENOTFOUND an answer that does not exist: a server without an owner
 *                  (mess_server_owner), an empty shard's entry point.
 *   MESS_EVERSION  a buffer's or a state file's format version.
 *   MESS_EEXIST    a name a call creates without replacing is taken: a
 *                  file, directory or symlink at mess_client_save_new's
 *                  path, a non-empty directory given to mess_server_create,
 *                  _import or _extract (errno EEXIST too).  Not MESS_EIO: the file there
 *                  is intact and nothing was written.
 *   MESS_EBUSY     a server directory's writer claim is held by another
 *                  handle (another process, or another handle of this
 *                  one): the change is refused, nothing written (errno
 *                  EBUSY too).  Not MESS_ESTATE: try again when the other
 *                  writer is done.
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
#define MESS_EROLE    (-11)  /* a client file given where a server file is expected, or vice versa
                                (or a query state file where either is, or the reverse) */
#define MESS_ECRYPTO  (-12)  /* the crypto library could not be initialised */
#define MESS_EPASS    (-13)  /* passphrase required, wrong, or given for an unsealed client file */
#define MESS_ESTATE   (-14)  /* not valid in the handle's current state (an item
                                already stored) */
#define MESS_EOWNER   (-15)  /* the server belongs to another client (owner tag differs) */
#define MESS_EEXIST   (-16)  /* a file the call creates already exists (left as it was) */
#define MESS_EBUSY    (-17)  /* another handle is writing the server directory (its writer claim) */

/* A short English description of a status code; never NULL. */
MESS_API const char *mess_strerror(int code);
/* The macro name of a status code ("MESS_EINVAL"; "MESS_OK" for 0), or NULL
 * for a code this library does not define: bindings read the codes from
 * the library they load (the codes are 0 and -1 down to the first NULL). */
MESS_API const char *mess_error_name(int code);

/* ------------------------------------------------------------------------
 * Growable structs
 *
 * mess_params, mess_finish_stats and mess_server_stats (and, in
 * mess_experimental.h, mess_account_stored_result, mess_estimate_result
 * and struct mess_plan_search) start with `uint32_t size`: the size of the struct as the caller's header declared
 * it.  New fields are only ever appended.  The library reads and writes
 * only the first `size` bytes of a caller's struct: a field beyond them
 * takes its default (reading) or is not written (filling), so a program
 * compiled against an older header keeps working with a newer library.
 * A size larger than the library's own struct (a newer header, an older
 * library) is accepted when every byte after the library's last field is
 * zero (fields it does not know, left at their defaults); filling zeroes
 * those bytes.  A size of 0 or below the struct's first layout
 * (MESS_*_MIN_SIZE) is MESS_EINVAL and nothing is read or written.
 *
 * Who sets the size:
 *   - mess_params: mess_params_default(), mess_client_params() and
 *     mess_server_params() are macros passing sizeof *(p) to their _sized
 *     functions, which store it in p->size; every call reading a
 *     mess_params then takes the size from p->size.  Set p->size yourself
 *     only if you fill a mess_params without those calls.
 *   - output structs (stats, results): the macro of the call that fills
 *     them passes sizeof of the struct type (the pointer may be NULL where
 *     the call allows it); the call stores it in ->size.
 * mess_sizeof_*() report the library's own sizes.  tests/test_layout.c
 * builds a caller with its own, older struct definitions and runs it
 * against this library; docs/API.md.
 * ---------------------------------------------------------------------- */

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
#define MESS_PAYLOAD_U8     3  /* one byte per component, no offset or step: exact,
                                  for vectors whose components are integers in
                                  [0, 255] (SIFT-like byte data; an upload of any
                                  other vector is MESS_EINVAL) */

/* Documented limits; larger values are MESS_ELIMIT.  Each is also a
 * function (libsodium's pattern), so a program or a binding can read the
 * limits of the library it runs with rather than of the header it was
 * built with. */
#define MESS_MAX_DIM        65536      /* embedding dimension */
#define MESS_MAX_SHARDS     1024
#define MESS_MAX_BITS       4096       /* kappa */
#define MESS_MAX_BUDGET     65535      /* per-shard candidate budget */
#define MESS_MAX_HNSW_M     256
#define MESS_MAX_EF         65535
MESS_API size_t mess_max_dim(void);
MESS_API size_t mess_max_shards(void);
MESS_API size_t mess_max_bits(void);
MESS_API size_t mess_max_budget(void);
MESS_API size_t mess_max_hnsw_m(void);
MESS_API size_t mess_max_ef(void);

typedef struct mess_params {
    uint32_t size;            /* sizeof(mess_params) as the caller compiled it;
                                 set by mess_params_default ("Growable structs") */
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

/* The first layout: every field up to and including `payload`.  Fields
 * after it (train_sample, and any added later) are optional: a caller
 * whose struct ends before one gets its default. */
#define MESS_PARAMS_MIN_SIZE offsetof(mess_params, train_sample)

/* sizeof(mess_params) in the library (bindings compare it with theirs). */
MESS_API size_t mess_sizeof_params(void);

/* Fills the paper's defaults for vectors of `dim` components: M = 64, t = 16,
 * kappa = 128 (at every dim: below 128 the hash stacks blocks), p_D = 0.08,
 * p_PRR = p_IRR = 0.0417424 (effective query flip 0.08), M_hnsw = 16,
 * efConstruction = 64 (the paper's 300 gives the same recall curve at
 * 4x the build), ef_search = 0, f32 payloads, L2 metric.  Sets
 * p->size (the macro passes sizeof *(p)); MESS_EINVAL for NULL or a size
 * below MESS_PARAMS_MIN_SIZE. */
MESS_API int mess_params_default_sized(mess_params *p, size_t size, uint32_t dim);
#define mess_params_default(p, dim) \
    mess_params_default_sized((p), sizeof *(p), (dim))

/* The defaults for data compared by `metric`.  MESS_METRIC_L2: those of
 * mess_params_default.  MESS_METRIC_IP and MESS_METRIC_COSINE (sentence and
 * document embeddings): kappa = 64, p_D = 0.016, p_PRR = p_IRR = 0.0080650
 * (effective query flip 0.016), ef_search = 64, the rest as
 * mess_params_default.  At these flips a differing bit costs 4.12 nats
 * against the paper's 2.44, and the accountants' bounds (`mess account
 * report`) were lower on average over real near pairs of the text set and
 * of the bundled SIFT set, but not for every pair: on 100 close SIFT pairs
 * (d_theta <= 0.05) higher for up to 15% of them in the complete-view
 * bound (by up to +11%) and 31% in one shard (by up to +45%).  Recall@10
 * was higher at every pool on both sets (docs/TEXT.md, "Decision").  The
 * flips are matched to 64 bits: raising kappa without raising them gives
 * less privacy than the defaults (start from mess_params_default then, as
 * the CLI and Python do when the bits are given).  Any other metric value:
 * the L2 defaults with that metric (mess_params_check refuses it).  Sets
 * p->size as mess_params_default does; MESS_EINVAL for NULL or a size below
 * MESS_PARAMS_MIN_SIZE. */
MESS_API int mess_params_default_for_sized(mess_params *p, size_t size, uint32_t dim,
                                          uint32_t metric);
#define mess_params_default_for(p, dim, metric) \
    mess_params_default_for_sized((p), sizeof *(p), (dim), (metric))

/* MESS_OK if the parameters are usable, else MESS_EINVAL / MESS_ELIMIT
 * (MESS_EINVAL also for a p->size below MESS_PARAMS_MIN_SIZE). */
MESS_API MESS_NODISCARD
int mess_params_check(const mess_params *p);

/* p_q = a(1-b) + b(1-a): the effective flip of PRR a followed by IRR b. */
MESS_API double mess_effective_flip(double p_prr, double p_irr);

/* The PRR = IRR probability whose composition flips with probability p_q. */
MESS_API double mess_split_flip(double p_q);

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
 *   the calls that only read (params, owner, check_owner, stats, save,
 *   error, log_position, the server view).  On a directory opened with
 *   delta chains the first of these calls to read a shard applies its
 *   chain under a lock in the handle, and the others wait for it
 *   (docs/PROTOCOL.md "Lazy apply").  apply_upload, apply_delete, compact,
 *   checkpoint and set_ef_search change the index: no other call on the
 *   same server may overlap them (a readers-writer lock in the caller:
 *   searches share, changes are exclusive).
 * mess_query: made by one client's request, finished with that client
 *   (another client's keys make every entry fail: MESS_EAUTH).  finish
 *   does not change it, so it may be finished any number of times (the
 *   same result for the same response), also from several threads; it
 *   must be released with mess_query_free, after its last finish.
 *   Sealing or saving it ("Query state") only reads it and the client's
 *   keys, so those calls may overlap anything but the frees.
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
 * seed: NULL for production (all keys and coins from the OS CSPRNG), or
 *       MESS_SEED_BYTES (32) bytes for deterministic experiment mode: keys, hash training and
 *       every randomized-response coin follow from the seed, so runs repeat.
 *       Keep the seed as secret as the master key.
 * threads: worker threads for training (0 = 1).
 * (This took a memo_capacity argument until the PRR memo cache went:
 * the permanent report is now a PRF of the query; see
 * mess_client_request.) */
#define MESS_SEED_BYTES 32
MESS_API size_t mess_seed_bytes(void);
MESS_API MESS_NODISCARD
int mess_client_new(const mess_params *p, const float *train, size_t n,
                    const uint8_t *seed, unsigned threads, mess_client **out);
MESS_API void mess_client_free(mess_client *c);
/* The client's parameters, written within `size` bytes of *out (the macro
 * passes sizeof *(out); "Growable structs"). */
MESS_API int mess_client_params_sized(const mess_client *c, mess_params *out,
                                      size_t size);
#define mess_client_params(c, out) \
    mess_client_params_sized((c), (out), sizeof *(out))
/* 1 if the client was created from a seed (deterministic experiment mode),
 * 0 for production clients and for NULL. */
MESS_API int mess_client_is_deterministic(const mess_client *c);

/* The clean (unperturbed) codes of vector x for every shard: M codes of
 * kappa/64 words, bit i of shard j in word i/64 at position i%64.  Secret:
 * for the client's own analysis (accountants, planning), never to be sent. */
MESS_API MESS_NODISCARD
int mess_client_codes(const mess_client *c, const float *x, uint64_t *codes);

/* Creates an empty server for the given public parameters. */
MESS_API MESS_NODISCARD
int mess_server_new(const mess_params *p, mess_server **out);
MESS_API void mess_server_free(mess_server *s);
/* The server's parameters (ef_search as set), like mess_client_params. */
MESS_API int mess_server_params_sized(const mess_server *s, mess_params *out,
                                      size_t size);
#define mess_server_params(s, out) \
    mess_server_params_sized((s), (out), sizeof *(out))

/* Sets the server's per-shard search beam: each shard is searched with
 * ef = max(budget, ef_search).  0 .. MESS_MAX_EF (larger is MESS_ELIMIT);
 * 0, the default, searches with the request's budget alone.  A larger beam
 * finds more of the true Hamming neighbours at proportionally more
 * distance computations.  Not part of the parameter fingerprint: clients
 * made with another ef_search are served.  Saved with the server (its
 * parameter block) and reported by mess_server_params.  Not to be called
 * while a search runs on the same server (it changes what searches read). */
MESS_API int mess_server_set_ef_search(mess_server *s, uint32_t ef_search);

/* How the server lays out its graphs in memory for search (issue 32).
 * MESS_LAYOUT_DEFAULT (0, the default): the graph files (or heap graphs)
 * as they are.  MESS_LAYOUT_CODES (1): beside them, each node's layer-0
 * link list and its neighbours' codes in one block, built in memory from
 * the graphs now (no file changes) and kept equal to them by every insert,
 * delete, compaction and checkpoint, so a search reads one block per
 * expanded node instead of one random line per neighbour.  It costs
 * 640 bytes per entry at M_hnsw 16 (40 M_hnsw, rounded up to 64) on top
 * of what the server keeps (mess_server_stats' bytes count it); only for
 * 128-bit codes (MESS_EPARAM otherwise).  Responses are byte-identical
 * either way.  Not saved; MESS_ENOMEM leaves the default layout; not to be
 * called while a search runs on the same server.  MESS_EINVAL for another
 * value. */
#define MESS_LAYOUT_DEFAULT 0
#define MESS_LAYOUT_CODES 1
MESS_API int mess_server_set_layout(mess_server *s, int layout);

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
MESS_API size_t mess_owner_bytes(void);

/* The client's owner tag. */
MESS_API int mess_client_owner(const mess_client *c, uint8_t tag[MESS_OWNER_BYTES]);

/* The server's owner tag: MESS_OK with *tag filled, or MESS_ENOTFOUND for a
 * server that has applied no upload yet (any client may become its owner). */
MESS_API int mess_server_owner(const mess_server *s, uint8_t tag[MESS_OWNER_BYTES]);

/* MESS_OK if a client with this tag may use the server (its owner, or any
 * client while the server has no owner), else MESS_EOWNER. */
MESS_API MESS_NODISCARD
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
 * infinity is MESS_EINVAL, as in mess_client_request).  Under
 * MESS_PAYLOAD_U8 every component must also be an integer in [0, 255]:
 * any other is MESS_EINVAL, nothing encoded.  threads: 0 = 1.
 *
 * Generations: an id the client deleted (mess_client_delete) is uploaded
 * at its next generation, under labels and ciphertexts unrelated to the
 * previous ones; the client remembers the generation of every id it ever
 * deleted, so save the client after an upload or a delete.  The storage
 * coins are a keyed PRF of (shard, id): encoding the same (id, vector)
 * again gives byte-identical records, and an update to another vector
 * flips the clean bits it shares with the old one exactly as before, so
 * re-insertions give the server no fresh samples to average
 * (docs/PRIVACY.md, "What the server learns").  The bits an update
 * changes show as changed stored bits (with probability
 * (1-p_D)^2 + p_D^2), and there the stored bits are both versions' clean
 * bits except with probability p_D^2 / ((1-p_D)^2 + p_D^2): any number of
 * versions costs at most twice one version's bound (Theorem V,
 * docs/PRIVACY.md "Versions of an item"; mess_account_versions). */
MESS_API MESS_NODISCARD
int mess_client_upload(mess_client *c, const uint64_t *ids,
                       const float *vectors, size_t n, unsigned threads,
                       uint8_t **buf, size_t *len);

/* Applies an upload buffer.  All or nothing: the buffer is validated in full
 * and every allocation the inserts need is made before any index changes;
 * an item already stored (at its current generation; the same upload
 * applied twice) is MESS_ESTATE, with nothing changed; a buffer whose owner tag is not the
 * server's owner's is MESS_EOWNER.  The first upload applied makes its
 * client the server's owner. */
MESS_API MESS_NODISCARD
int mess_server_apply_upload(mess_server *s, const uint8_t *buf, size_t len,
                             unsigned threads);

/* Counts the records of an upload buffer the server already stores (those
 * mess_server_apply_upload would refuse as already stored), changing
 * nothing: how an interrupted insert finds where to go on (`mess insert
 * --resume` probes a batch at a time, then halves the batch where the
 * rows stored end).  The buffer is checked as
 * mess_server_apply_upload checks it (MESS_EFORMAT, MESS_EOWNER, ...); a
 * record of a shard a subset server does not hold is MESS_ESTATE.  A
 * record whose id the server stores with another entry (another vector
 * under that id, so not a row an interrupted insert applied) is
 * MESS_ESTATE with errno EEXIST (errno is left as it was for the other
 * MESS_ESTATE: set it to 0 before the call to tell the two apart).
 * *stored: how many of its *records (may be NULL) records are stored. */
MESS_API MESS_NODISCARD
int mess_server_count_stored(const mess_server *s, const uint8_t *buf, size_t len,
                             size_t *stored, size_t *records);

/* Encodes the (shard, label) pairs that remove the given ids (their
 * current generation) and records them as deleted in the client: deleting
 * again resends the same pairs, inserting again moves to a new generation.
 * All or nothing: on error neither a buffer nor a change to the client. */
MESS_API MESS_NODISCARD
int mess_client_delete(mess_client *c, const uint64_t *ids, size_t n,
                       uint8_t **buf, size_t *len);

/* Marks the entries named in a delete buffer deleted (they still route but
 * are never returned).  *missing (may be NULL) counts pairs not found.
 * A buffer from a client other than the server's owner is MESS_EOWNER. */
MESS_API MESS_NODISCARD
int mess_server_apply_delete(mess_server *s, const uint8_t *buf, size_t len,
                             size_t *missing);

/* Rebuilds every shard without its deleted entries.  All or nothing: the
 * new shards are built aside and replace the old ones once all exist.
 * A directory-backed server's next checkpoint also writes every shard
 * that has a delta chain as a new graph file (the chain folds away, so
 * later opens have nothing to apply; docs/PROTOCOL.md "Lazy apply"). */
MESS_API MESS_NODISCARD
int mess_server_compact(mess_server *s, unsigned threads);

/* Exact buffer sizes for the parameters (communication figures). */
MESS_API size_t mess_upload_size(const mess_params *p, size_t items);
MESS_API size_t mess_delete_size(const mess_params *p, size_t items);
MESS_API size_t mess_request_size(const mess_params *p);
MESS_API size_t mess_response_size(const mess_params *p, size_t pool);
MESS_API size_t mess_payload_size(const mess_params *p); /* one ciphertext entry */
         
MESS_API void mess_buf_free(uint8_t *buf);

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
MESS_API MESS_NODISCARD
int mess_client_request(mess_client *c, const float *q, size_t pool,
                        mess_query **q_out, uint8_t **req, size_t *req_len);

/* Searches every shard for its budget of nearest perturbed codes and returns
 * the ciphertexts.  A request from a client other than the server's owner
 * is MESS_EOWNER.  Safe to call from many threads on one server.
 * threads: workers for the fan-out over shards (0 = 1); the server keeps
 * them for its next searches (a search finding them busy, or in a child
 * forked since they started, starts its own). */
MESS_API MESS_NODISCARD
int mess_server_search(const mess_server *s, const uint8_t *req,
                       size_t req_len, unsigned threads, uint8_t **resp,
                       size_t *resp_len);

typedef struct mess_finish_stats {
    uint32_t size;         /* sizeof as the caller compiled it (set by finish) */
    size_t candidates;     /* entries in the response */
    size_t unique;         /* distinct authenticated ids among them */
    size_t auth_failures;  /* opened entries rejected by AEAD (dropped) */
    size_t unopened;       /* further copies of an id already authenticated,
                              not opened (0 with verify-all) */
} mess_finish_stats;
/* First layout: up to auth_failures (unopened is optional). */
#define MESS_FINISH_STATS_MIN_SIZE offsetof(mess_finish_stats, unopened)
MESS_API size_t mess_sizeof_finish_stats(void);

/* Worker threads mess_client_finish uses to open response entries (default
 * 1; 0 means 1).  A property of this handle only, not saved with it. */
MESS_API int mess_client_set_threads(mess_client *c, unsigned threads);

/* Whether mess_client_finish authenticates every entry of a response
 * (on != 0) or, the default, one authentic copy per id.  The results are
 * the same either way: each entry's id is read first without
 * authentication, and for every id the copies are opened in response order
 * until one authenticates, which is the copy an open-everything pass would
 * use.  Verify-all only makes auth_failures count tampered redundant copies
 * too (an audit of the server), at about twice the cost of the default at
 * t = 16.  A property of this handle only, not saved with it. */
MESS_API int mess_client_set_verify_all(mess_client *c, int on);

/* Decrypts the response, drops and counts entries failing authentication,
 * dedupes by id (see mess_client_set_verify_all), reranks exactly and
 * writes up to k results (ascending distance, ties by id) to ids/dists;
 * *n_out is how many.
 *   ids, dists: room for k entries each (may be NULL when k is 0);
 *   n_out: required; stats: may be NULL.
 * A response that is not for this query's request is MESS_EAUTH; a
 * response in which every entry failed authentication returns MESS_EAUTH
 * too (with stats filled); a malformed or truncated one is MESS_EFORMAT.
 * On any error *n_out is 0 and ids/dists hold no results: check the
 * return value (MESS_NODISCARD), an empty result and a forged response
 * look alike otherwise.
 * The query: made by this client's mess_client_request (another client's
 * query fails with MESS_EAUTH); finish does not change or consume it, so
 * it may be finished again (same response, same result), also from
 * several threads; free it with mess_query_free after its last finish.
 * stats is filled within stats_size bytes; the macro passes
 * sizeof(mess_finish_stats) ("Growable structs"). */
MESS_API MESS_NODISCARD
int mess_client_finish_sized(const mess_client *c, const mess_query *q,
                             const uint8_t *resp, size_t resp_len,
                             size_t k, uint64_t *ids, float *dists,
                             size_t *n_out, mess_finish_stats *stats,
                             size_t stats_size);
#define mess_client_finish(c, q, resp, resp_len, k, ids, dists, n_out, stats) \
    mess_client_finish_sized((c), (q), (resp), (resp_len), (k), (ids), \
                             (dists), (n_out), (stats), sizeof(mess_finish_stats))
MESS_API void mess_query_free(mess_query *q);

/* ------------------------------------------------------------------------
 * Query state: a query that outlives its process (docs/PROTOCOL.md,
 * "Query state")
 *
 * A mess_query lives in memory, and a response is finished only with the
 * query of its request (any other is MESS_EAUTH).  These calls keep
 * queries elsewhere: sealed into a buffer the caller stores where it likes
 * (mess_query_seal), or into a file (mess_query_save), and read back by
 * the client that made them in any process (mess_query_unseal,
 * mess_query_load), so a request sent before a restart is finished after
 * it, with the same results as without the restart.
 *
 * A query state holds the clean query, as secret as the data: it is
 * sealed (XChaCha20-Poly1305) under a key derived from the client's master
 * key, so only that client reads it back.  Another client's state, or a
 * changed byte of the sealed bytes, is MESS_EAUTH; a state of other
 * parameters MESS_EPARAM; of another format version MESS_EVERSION
 * (mess_query_state_version names this build's); a buffer of the wrong
 * length or not a query state MESS_EFORMAT.  The file is the state-file
 * container (role 3, mess_state_file_peek) around the sealed bytes,
 * written like the client file (a new file renamed over PATH, mode 0600):
 * a changed byte of the file is MESS_EFORMAT (its checksum), a client or
 * server file given to mess_query_load MESS_EROLE (and a query state file
 * given to theirs).  Sealing draws a random nonce, so the same queries
 * seal to other bytes every time (in deterministic mode too).
 *
 * n queries (1 .. 2^32 - 1), each made by this client's requests, are
 * sealed together into one buffer or file (any other query is MESS_EINVAL
 * where its dimension shows it).  Unsealing or loading fills qs[0 .. n)
 * with new queries (each freed with mess_query_free) and *n; cap, the room
 * of qs, below the number stored is MESS_ELIMIT with *n set to that number
 * and nothing allocated (a caller that does not know it asks with cap 0,
 * qs may then be NULL).  On any other failure *n is 0 and qs[0 .. cap)
 * are NULL.  The finish of a loaded query is that of the original: the
 * same request id, budgets and clean query.  These calls only read the
 * client's keys and parameters, which never change: safe from any thread,
 * alongside every call but mess_client_free.
 * ---------------------------------------------------------------------- */
#define MESS_QUERY_STATE_VERSION 1
MESS_API uint32_t mess_query_state_version(void);
/* The exact length of n sealed queries for parameters p: 52 + 16 + n x (16
 * + 2 M + 4 dim) bytes; 0 for n = 0, n above 2^32 - 1 or invalid p. */
MESS_API size_t mess_query_sealed_size(const mess_params *p, size_t n);
/* The sealed form of qs[0 .. n) in *buf (mess_buf_free). */
MESS_API MESS_NODISCARD
int mess_query_seal(const mess_client *c, const mess_query *const *qs, size_t n,
                    uint8_t **buf, size_t *len);
/* The same into cap bytes of the caller's ("Caller-owned buffers"). */
MESS_API MESS_NODISCARD
int mess_query_seal_into(const mess_client *c, const mess_query *const *qs, size_t n,
                         uint8_t *buf, size_t cap, size_t *len);
MESS_API MESS_NODISCARD
int mess_query_unseal(const mess_client *c, const uint8_t *buf, size_t len,
                      mess_query **qs, size_t cap, size_t *n);
/* The sealed form of qs[0 .. n) as the file at path. */
MESS_API MESS_NODISCARD
int mess_query_save(const mess_client *c, const mess_query *const *qs, size_t n,
                    const char *path);
MESS_API MESS_NODISCARD
int mess_query_load(const mess_client *c, const char *path, mess_query **qs,
                    size_t cap, size_t *n);

/* ------------------------------------------------------------------------
 * Shard groups: one deployment served by several servers (docs/DISTRIBUTED.md)
 *
 * The M shards are independent, so a deployment can be spread over servers
 * that each hold a group of shards (python/mess/dask.py does it on Dask).
 * These calls only move bytes; the library opens no connection.
 *   - mess_records_split keeps the records of an upload or delete buffer
 *     that belong to a shard set: each group's server applies its own part
 *     (an empty part too: it carries the owner tag).  A server fed only its
 *     groups' parts builds exactly the graphs the whole server builds for
 *     those shards.
 *   - mess_server_search_shards answers a request on a shard set with a
 *     PARTIAL response (docs/PROTOCOL.md, "partial") covering exactly it.
 *   - mess_response_merge joins the partials of one request, which must
 *     cover every shard exactly once, into the response the whole server
 *     would have given, byte for byte; mess_client_finish takes it.
 * A shard set is nshards >= 1 distinct shard numbers below M, in any order;
 * anything else is MESS_EINVAL.
 * ---------------------------------------------------------------------- */

/* The records of buf (an upload or a delete for parameters p) whose shard
 * is in the set, in their order, with buf's header and owner tag and the
 * record count adjusted: a valid buffer of the same kind (possibly with no
 * record) in *out (mess_buf_free).  buf is checked as a server would
 * parse it: MESS_EFORMAT / MESS_EVERSION / MESS_EPARAM for a malformed
 * buffer or a record naming a shard >= M. */
MESS_API MESS_NODISCARD
int mess_records_split(const mess_params *p, const uint8_t *buf, size_t len,
                       const uint32_t *shards, size_t nshards, uint8_t **out,
                       size_t *out_len);

/* mess_server_search restricted to a shard set: the partial response
 * (shards in increasing order) in *part (mess_buf_free).  Each shard's
 * section is exactly what mess_server_search returns for it.  A shard the
 * server does not hold is MESS_ESTATE; otherwise as mess_server_search
 * (MESS_EOWNER, MESS_EFORMAT...).  Safe from many threads on one server. */
MESS_API MESS_NODISCARD
int mess_server_search_shards(const mess_server *s, const uint8_t *req,
                              size_t req_len, const uint32_t *shards,
                              size_t nshards, unsigned threads, uint8_t **part,
                              size_t *part_len);

/* Merges nparts partial responses to the request req (any order) into one
 * response in *resp (mess_buf_free).  Refused, with nothing allocated and
 * a sentence in msg (msg_cap bytes, NUL-terminated; msg may be NULL):
 *   MESS_EINVAL    NULL arguments, nparts 0, invalid parameters;
 *   MESS_EFORMAT   a part that is not a partial response, cut short, with
 *                  bytes after its end, a shard >= M or out of order, more
 *                  entries than the shard's budget; a shard in two parts
 *                  (overlap) or in none (gap); a malformed request;
 *   MESS_EVERSION, MESS_EPARAM  a part of another wire version or made for
 *                  other parameters;
 *   MESS_EAUTH     a part answering another request (request id differs).
 * The entries are not opened: a server can still forge them, which
 * mess_client_finish detects as it does for one server. */
MESS_API MESS_NODISCARD
int mess_response_merge(const mess_params *p, const uint8_t *req,
                        size_t req_len, const uint8_t *const *parts,
                        const size_t *part_lens, size_t nparts, uint8_t **resp,
                        size_t *resp_len, char *msg, size_t msg_cap);

/* ------------------------------------------------------------------------
 * Caller-owned buffers
 *
 * Each call above that allocates its output buffer has an _into variant
 * writing into `cap` bytes the caller owns (reusable across calls, on the
 * stack, in a memory-mapped file...).  *len is always set to the bytes
 * the output needs: on MESS_OK they were written; if cap is smaller the
 * call returns MESS_ELIMIT, writes nothing to the buffer and changes
 * nothing (the client's operation counter and generation map stay as
 * they were, no query is made), so the caller can grow the buffer to *len
 * and call again.  The sizes are known in advance: mess_upload_size(p, n),
 * mess_delete_size(p, n), mess_request_size(p) exactly, and
 * mess_response_size(p, pool) as an upper bound of a response (a shard
 * holding fewer entries than its budget returns fewer).  Everything else,
 * errors and threads included, is as in the allocating call.
 * ---------------------------------------------------------------------- */
MESS_API MESS_NODISCARD
int mess_client_upload_into(mess_client *c, const uint64_t *ids,
                            const float *vectors, size_t n, unsigned threads,
                            uint8_t *buf, size_t cap, size_t *len);
MESS_API MESS_NODISCARD
int mess_client_delete_into(mess_client *c, const uint64_t *ids, size_t n,
                            uint8_t *buf, size_t cap, size_t *len);
MESS_API MESS_NODISCARD
int mess_client_request_into(mess_client *c, const float *q, size_t pool,
                             mess_query **q_out, uint8_t *req, size_t cap,
                             size_t *req_len);
MESS_API MESS_NODISCARD
int mess_server_search_into(const mess_server *s, const uint8_t *req,
                            size_t req_len, unsigned threads, uint8_t *resp,
                            size_t cap, size_t *resp_len);

/* ------------------------------------------------------------------------
 * Batches: persistent worker threads
 *
 * The calls above that take `threads` start and join that many threads
 * on every call.  A mess_workers is a set of threads started once and
 * reused by the batch calls below (mess_client_request_batch,
 * mess_server_search_batch, mess_client_finish_batch), which spread the
 * items of a batch over it: many queries cost one hand-off instead of a
 * thread start per call.  It is an object of its own, not part of a client
 * or server, so one set serves both roles in one process, its size and
 * lifetime are the caller's, and no handle keeps idle threads.
 *
 * threads counts the workers, the calling thread included (0 = 1; 1 runs
 * every batch inline); more than MESS_MAX_THREADS is MESS_ELIMIT; a
 * thread that cannot be started is MESS_ENOMEM (nothing kept).  Safe to
 * share: batches from several threads on one mess_workers run one after
 * the other.  mess_workers_free joins the threads; no batch may be
 * running on it then.
 * ---------------------------------------------------------------------- */
#define MESS_MAX_THREADS 256
MESS_API size_t mess_max_threads(void);
typedef struct mess_workers mess_workers;
MESS_API MESS_NODISCARD
int mess_workers_new(unsigned threads, mess_workers **out);
MESS_API void mess_workers_free(mess_workers *w);
/* The number of workers, the caller included (0 for NULL). */
MESS_API unsigned mess_workers_threads(const mess_workers *w);

/* Batch calls.  Each spreads its items over w (NULL: inline, one worker),
 * one item per worker at a time, each item on one thread (no fan-out
 * inside an item: a batch is parallel across items).  They take the
 * handle's lock once for the whole batch (mess.h, "Threads").
 *
 * Requests for nq queries (queries: nq x dim floats) with the same total
 * pool, written into one caller buffer: request i is the *req_len bytes
 * at reqs + i * *req_len (*req_len = mess_request_size(p)); cap below
 * nq * *req_len is MESS_ELIMIT with nothing changed.  q_out receives nq
 * queries (free each with mess_query_free).  The same as nq calls of
 * mess_client_request in index order: deterministic mode gives request i
 * the operation counter's value plus i, so the bytes equal those of the
 * sequential calls.  All or nothing: on any error no query is kept, the
 * counter does not move, and q_out holds NULLs. */
MESS_API MESS_NODISCARD
int mess_client_request_batch(mess_client *c, const float *queries, size_t nq,
                              size_t pool, mess_workers *w, mess_query **q_out,
                              uint8_t *reqs, size_t cap, size_t *req_len);

/* Searches n requests (reqs[i] of req_lens[i] bytes); resps[i] receives a
 * malloc'd response of resp_lens[i] bytes (mess_buf_free), exactly what
 * mess_server_search returns for it.
 *   status == NULL: all or nothing; on the first error every response is
 *     freed, resps[] are NULL, and that error is returned.
 *   status != NULL: items are independent; status[i] is item i's code,
 *     failed items have resps[i] = NULL and resp_lens[i] = 0, and the call
 *     returns MESS_OK if all succeeded, else the code of the first failed
 *     item (the successful responses are still the caller's to free).
 * Safe to call from many threads on one server, like mess_server_search.
 * The batch is searched shard by shard across the workers, each shard's
 * graph for up to 256 requests at once (docs/PERFORMANCE.md
 * "Throughput"); each response has the bytes mess_server_search gives. */
MESS_API MESS_NODISCARD
int mess_server_search_batch(const mess_server *s, const uint8_t *const *reqs,
                             const size_t *req_lens, size_t n,
                             mess_workers *w, uint8_t **resps,
                             size_t *resp_lens, int *status);

/* Finishes n queries: item i is qs[i] with response resps[i] of
 * resp_lens[i] bytes; its up to k results go to ids + i*k and dists + i*k,
 * their number to n_out[i]; stats (NULL, or an array of n structs of
 * stats_size bytes each: the macro passes sizeof(mess_finish_stats), so
 * stats[i] indexes the caller's own array) as in mess_client_finish.
 * Items are independent (a forged response fails only its item, with
 * n_out[i] = 0): status (may be NULL) receives each item's code, and the
 * call returns MESS_OK if all succeeded, else the first failed item's
 * code.  Each item is opened on one worker (the client's set_threads is
 * not used). */
MESS_API MESS_NODISCARD
int mess_client_finish_batch_sized(const mess_client *c,
                                   const mess_query *const *qs,
                                   const uint8_t *const *resps,
                                   const size_t *resp_lens, size_t n, size_t k,
                                   mess_workers *w, uint64_t *ids,
                                   float *dists, size_t *n_out,
                                   mess_finish_stats *stats, size_t stats_size,
                                   int *status);
#define mess_client_finish_batch(c, qs, resps, resp_lens, n, k, w, ids, dists, \
                                 n_out, stats, status) \
    mess_client_finish_batch_sized((c), (qs), (resps), (resp_lens), (n), (k), \
                                   (w), (ids), (dists), (n_out), (stats), \
                                   sizeof(mess_finish_stats), (status))

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
MESS_API MESS_NODISCARD
int mess_client_save(const mess_client *c, const char *path,
                     const char *passphrase);
MESS_API MESS_NODISCARD
int mess_client_load(const char *path, const char *passphrase,
                     mess_client **out);
/* The state-file container version this build writes (and the versions
 * it reads, MESS_STATE_FILE_VERSION_MIN up to it); files of any other
 * version are MESS_EVERSION.  mess_state_file_peek reads only a
 * state file's unauthenticated header (no passphrase needed): its container
 * version, role (1 client, 2 server, 3 query state: mess_query_save) and
 * whether it is sealed (a query state's body is sealed by the client's
 * key, not by a passphrase: 0); MESS_EFORMAT
 * if it is not a state file.  For messages ("version 1 found, version 2
 * expected") and for telling a sealed client file from an unsealed one. */
#define MESS_STATE_FILE_VERSION 3
/* The oldest container version read: a version 2 client file (before the
 * counts of mess_client_applied) loads with its counts unknown. */
#define MESS_STATE_FILE_VERSION_MIN 2
MESS_API uint32_t mess_state_file_version(void);
MESS_API int mess_state_file_peek(const char *path, uint32_t *version, uint32_t *role,
                                  int *sealed);
MESS_API MESS_NODISCARD
int mess_client_save_pass(const mess_client *c, const char *path,
                          const char *passphrase, size_t passphrase_len);
/* Saves a new client file: as mess_client_save_pass, but never replaces
 * one.  The file is written to the same fresh temporary, fsync'd, and
 * linked to path with link(2), which fails if any name is there (a file,
 * a directory, a symlink, even a dangling one): MESS_EEXIST (errno
 * EEXIST), nothing at path changed, nothing left behind.  Of several
 * processes or threads creating the same path at once exactly one gets
 * MESS_OK (tests/test_statefile.c races forked processes).  For a new
 * client, whose file is the only copy of the keys its server's entries
 * are sealed under (`mess init`): a second init cannot replace the first
 * one's keys.  A file system without hard links (FAT) refuses the link:
 * MESS_EIO with errno EPERM; mess_client_save_pass does not need one. */
MESS_API MESS_NODISCARD
int mess_client_save_new(const mess_client *c, const char *path,
                         const char *passphrase, size_t passphrase_len);
MESS_API MESS_NODISCARD
int mess_client_load_pass(const char *path, const char *passphrase,
                          size_t passphrase_len, mess_client **out);
/* Changes a server acknowledged: note `uploaded` items and `deleted` ids
 * once the server has applied an upload or delete buffer of this client
 * (a directory-backed server has it in its log by then), and save the
 * client.  The totals are kept in the client file (container version 3)
 * so that `mess verify --client C` can say when a server holds fewer
 * items than uploads - deletes: a check against accidents (a log cut
 * short, an old copy of a directory), not against a malicious host, which
 * can answer anything.  A client file of version 2 loads with the totals
 * unknown: mess_client_applied is MESS_ENOTFOUND and notes are ignored
 * (it never counted, so no total would be true).  A new client starts at
 * 0, 0.  The totals saturate; UINT64_MAX is never a count. */
MESS_API MESS_NODISCARD
int mess_client_note_applied(mess_client *c, uint64_t uploaded, uint64_t deleted);
MESS_API MESS_NODISCARD
int mess_client_applied(const mess_client *c, uint64_t *uploaded, uint64_t *deleted);
MESS_API MESS_NODISCARD
int mess_server_save(const mess_server *s, const char *path);
/* expect: NULL, or parameters the file must match (else MESS_EPARAM). */
MESS_API MESS_NODISCARD
int mess_server_load(const char *path, const mess_params *expect,
                     mess_server **out);

/* ------------------------------------------------------------------------
 * Server directories (docs/PROTOCOL.md, "Server directory")
 *
 * A server's working form is a directory: a MANIFEST (generation,
 * parameters, owner tag, per shard the names, lengths and digest of its
 * files; BLAKE2b-256 checksummed) and, per shard, a graph file and a
 * payload arena (the ciphertexts, mapped read-only and read only for the
 * entries a search returns).  Opening costs O(shards), not O(entries).
 * The single compressed file of mess_server_save is the travel form:
 * mess_server_export writes it (byte for byte the same for the same
 * server), mess_server_import turns it into a directory.
 *
 * Uploads, deletes and compactions applied to a directory-backed server
 * are first appended to its write-ahead log (S/wal; one write and one
 * fdatasync), then change the handle: once the call returns MESS_OK the
 * change survives a crash, and the next open replays it.  If the append
 * fails nothing changes (MESS_EIO, errno kept).  mess_server_checkpoint
 * folds them into the files: the changed shards' files for the next
 * generation (the arena is appended to; per shard a delta file with the
 * graph blocks that changed, or, when the shard's chain of deltas is
 * long (8) or large (half its graph file), the graph written anew), fsync,
 * then MANIFEST.tmp, fsync, rename over MANIFEST, fsync of the directory,
 * then an empty log.  A crash leaves the old generation with its log or
 * the new one; unnamed files of an unfinished checkpoint are replaced by
 * the next one.  Checkpoints of one directory run one at a time (a lock
 * on S/LOCK); servers opened on disjoint shard sets of one directory may
 * each checkpoint (each keeps the others' records), but two handles must
 * never write the same shard, and nothing else may write its files.
 * A directory this process may not write opens read-only: updates are
 * MESS_EIO (errno EACCES, EPERM or EROFS).
 *
 * A directory, its files or its MANIFEST that is missing, truncated or
 * modified is MESS_EIO (errno kept) or MESS_EFORMAT (a length, a
 * checksum or a field the manifest, a graph or a delta does not bear
 * out); mess_server_verify names the file and the reason.  The open
 * checks a delta's length and header only: its body is read and checked
 * when the first call reads its shard, which then fails
 * (mess_server_error names the file).  A directory of
 * an older format (MANIFEST version 1, before the deltas) is
 * MESS_EVERSION: export it with the library that wrote it and import the
 * file with this one.
 * ---------------------------------------------------------------------- */
/* Creates directory `dir` (or fills an existing empty one) with an empty
 * server of parameters p (generation 1) and returns the handle, backed by
 * it.  A non-empty directory (or a file at dir) is MESS_EEXIST with
 * errno EEXIST, nothing changed (MESS_EIO before 0.3.0). */
MESS_API MESS_NODISCARD
int mess_server_create(const char *dir, const mess_params *p, mess_server **out);
/* Opens the server in `dir`.  expect: NULL, or parameters it must match
 * (else MESS_EPARAM).  shards, nshards: the shards to hold (NULL, 0: all);
 * a shard out of range or listed twice is MESS_EINVAL.  A server opened on
 * a subset maps only those shards' files; an upload or delete with a
 * record for another shard is MESS_ESTATE (nothing applied: give it its
 * part, mess_records_split), and so is mess_server_search (it answers
 * mess_server_search_shards on its shards).  mess_server_export of a
 * subset is MESS_EINVAL.  A travel file given as `dir` is MESS_EFORMAT.
 * The log is replayed (a subset applies its shards' part of each record;
 * a torn record at its end, from a crash in the middle of an append, is
 * cut); a record that cannot be applied, or a damaged record followed by
 * a complete one, fails the open (MESS_EFORMAT; mess_server_verify says
 * where).  A subset server does not write the log (its updates are
 * durable at its checkpoint), and may not checkpoint while the log holds
 * records of shards it does not hold (MESS_ESTATE). */
MESS_API MESS_NODISCARD
int mess_server_open(const char *dir, const mess_params *expect,
                     const uint32_t *shards, size_t nshards, mess_server **out);
/* Makes what was applied since the last checkpoint durable (above); on
 * failure the directory keeps its last generation and the handle its
 * contents.  MESS_EINVAL for a server in memory (mess_server_new, _load). */
MESS_API MESS_NODISCARD
int mess_server_checkpoint(mess_server *s);
/* Checks the directory in full: the MANIFEST, every file's length, every
 * graph file's and delta's digest, the structure of every graph with its
 * deltas applied, and the write-ahead log (replayed on
 * a copy in memory; the directory is not changed).  msg (msg_cap bytes, may be 0) gets
 * one line: the file and the reason on failure, a summary on MESS_OK. */
MESS_API MESS_NODISCARD
int mess_server_verify(const char *dir, char *msg, size_t msg_cap);
/* The travel form: mess_server_save under its documented name; a server
 * opened on a subset of its shards is MESS_EINVAL. */
MESS_API MESS_NODISCARD
int mess_server_export(const mess_server *s, const char *file);
/* Reads a travel file (mess_server_load's checks) and writes it as a new
 * directory (as mess_server_create does: a non-empty one is MESS_EEXIST). */
MESS_API MESS_NODISCARD
int mess_server_import(const char *file, const char *dir);
/* A shard group's directory (issue 16, docs/DISTRIBUTED.md) made from the
 * server directory src_dir: the graph file and the arena of each of the
 * nshards shards listed (distinct, < M) are copied into a new directory
 * dst_dir (never hard-linked: arenas are appended to in place) with its
 * own MANIFEST (the source's generation and owner), empty files for every
 * other shard and an empty write-ahead log.  Opened on its shard set
 * (mess_server_open(dst_dir, p, shards, nshards)) it answers
 * mess_server_search_shards for them byte for byte as the source does and
 * refuses the others (MESS_ESTATE); opened whole, the other shards are
 * empty (a group's server, which only its shards' records ever reach).
 * Every graph is checked against the manifest's digest as it is copied
 * and the result is opened once before it takes its name: everything is
 * written into a temporary directory next to dst_dir (dst_dir.tmp-XXXXXX)
 * and renamed, so a failure leaves no dst_dir.  dst_dir that exists is
 * MESS_EEXIST with errno EEXIST (as for mess_server_create); a source
 * whose log holds updates after its generation is MESS_ESTATE
 * (checkpoint it first); a source that is not a
 * server directory, or with a file missing, short or modified,
 * MESS_EIO / MESS_EFORMAT; a shard out of range or listed twice
 * MESS_EINVAL.  msg (msg_cap bytes, may be 0) gets the reason. */
MESS_API MESS_NODISCARD
int mess_server_extract(const char *src_dir, const uint32_t *shards, size_t nshards,
                        const char *dst_dir, char *msg, size_t msg_cap);
/* Where a directory-backed server stands: the MANIFEST generation it is at
 * and the records in its write-ahead log after it (replayed at open and
 * appended since; each upload, delete or compaction a server of every
 * shard applies is one record, and a checkpoint moves to the next
 * generation with none).  A caller that numbers its changes (mess.dask's
 * groups) keeps "generation G holds my changes up to n" to know which
 * ones a reopened server has.  MESS_EINVAL for a server in memory. */
MESS_API MESS_NODISCARD
int mess_server_log_position(const mess_server *s, uint64_t *generation,
                             uint64_t *log_records);
/* Why a shard of a directory-backed server cannot be used.  The open
 * checks each delta of a shard's chain only by its length and header; the
 * chain is read, checked and applied by the first call that reads the
 * shard (a search, an update, compact, export...), so a delta damaged in
 * its body fails that call, and every later one that reads the shard,
 * with MESS_EFORMAT (MESS_EIO if it cannot be read) while the other
 * shards keep working (docs/PROTOCOL.md "Lazy apply").  Running out of
 * memory (MESS_ENOMEM) or of file descriptors (MESS_EIO, errno EMFILE or
 * ENFILE) fails only that call: the next one applies the chain again.  This returns that
 * code with one line in msg naming the file and the reason, or MESS_OK
 * and an empty msg when no shard has failed.  Safe from many threads. */
MESS_API int mess_server_error(const mess_server *s, char *msg, size_t msg_cap);

typedef struct mess_server_stats {
    uint32_t size;         /* sizeof as the caller compiled it (set by the getter) */
    size_t entries;        /* nodes over all shards, deleted included */
    size_t live;
    size_t deleted;
    size_t bytes;          /* memory in use: graphs, codes, ciphertexts */
    size_t min_shard, max_shard; /* live entries of the smallest / largest shard */
} mess_server_stats;
/* First layout: up to bytes (min_shard and max_shard are optional). */
#define MESS_SERVER_STATS_MIN_SIZE offsetof(mess_server_stats, min_shard)
MESS_API size_t mess_sizeof_server_stats(void);
MESS_API int mess_server_stats_get_sized(const mess_server *s,
                                         mess_server_stats *out, size_t size);
#define mess_server_stats_get(s, out) \
    mess_server_stats_get_sized((s), (out), sizeof *(out))

#ifdef __cplusplus
}
#endif
#endif /* MESS_H */
