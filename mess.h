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
#define MESS_EIO       (-3)  /* file could not be opened, read, written or synced */
#define MESS_EFORMAT   (-4)  /* malformed, truncated or corrupted input */
#define MESS_EVERSION  (-5)  /* input written by an unsupported format version */
#define MESS_EPARAM    (-6)  /* input made for other public parameters */
#define MESS_EAUTH     (-7)  /* authentication failed (tampered data, wrong key) */
#define MESS_ENOTFOUND (-8)  /* no such item / label */
#define MESS_ELIMIT    (-9)  /* a documented size limit would be exceeded */
#define MESS_ENUMERIC (-10)  /* numerical routine failed (LAPACK, no convergence) */
#define MESS_EROLE    (-11)  /* a client file given where a server file is expected, or vice versa */
#define MESS_ECRYPTO  (-12)  /* the crypto library could not be initialised */
#define MESS_EPASS    (-13)  /* passphrase required, or wrong passphrase */
#define MESS_ESTATE   (-14)  /* operation not valid in the object's current state */

/* A short English description of a status code; never NULL. */
const char *mess_strerror(int code);

/* ------------------------------------------------------------------------
 * Vector files (TEXMEX formats)
 *
 * .fvecs: per record, int32 dim then dim float32.
 * .ivecs: per record, int32 dim then dim int32.
 * .bvecs: per record, int32 dim then dim uint8.
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
void mess_vecs_free(void *p);

#ifdef __cplusplus
}
#endif
#endif /* MESS_H */
