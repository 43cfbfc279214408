/*
 * statefile.h - the container both state files use.  Internal header.
 *
 *   0   magic "MESSSTAT"
 *   8   u32 format version (MESS_STATE_FILE_VERSION = 3, written; 2 is
 *           read too: the same container, a client body of version 2
 *           inside; 1 is refused)
 *   12  u32 role (STATEFILE_CLIENT / STATEFILE_SERVER / STATEFILE_QUERY)
 *   16  u32 flags (bit 0: body sealed under a passphrase)
 *   20  public parameters (MESS_PARAMS_BYTES)
 *   84  u64 raw length (body after decompression); 0 if sealed
 *   92  u64 stored length (body bytes that follow the header)
 *   100 seal block, only if sealed: salt[16] | u64 opslimit | u64 memlimit |
 *       nonce[24]
 *   ..  body: unsealed, the zstd frame of the raw body; sealed,
 *       XChaCha20-Poly1305 (associated data: every header byte before the
 *       body) of  u64 raw length | u64 frame length | zstd frame | zero
 *       padding  to statefile_padme(16 + frame length) bytes, so the file's
 *       length shows neither the raw length nor the exact frame length
 *   end BLAKE2b-256 of every byte before it
 *
 * Written to a fresh PATH.tmp.XXXXXX (mkstemp: O_EXCL, never a planted
 * symlink), fsync'd, renamed over PATH, directory fsync'd (atomicfile.c,
 * which the vector files share); statefile_create links it to PATH
 * instead, never replacing a file there.  MESS_EIO leaves errno as the
 * failing system call set it.
 */
#ifndef MESS_STATEFILE_H
#define MESS_STATEFILE_H

#include "params.h"

#define STATEFILE_CLIENT 1
#define STATEFILE_SERVER 2
/* Pending queries (client_query_state.c): the body is sealed by the
 * client's key, the container itself unsealed. */
#define STATEFILE_QUERY 3

/* passphrase: NULL (pass_len 0) for an unsealed file, else pass_len > 0
 * bytes (NUL bytes included); an empty one is MESS_EINVAL.
 * mode: permission bits of the new file (0600 for the client). */
int statefile_write(const char *path, uint32_t role, const mess_params *p,
                    const uint8_t *raw, size_t raw_len,
                    const char *passphrase, size_t pass_len, unsigned mode);
/* The same, but path must not exist: the file is linked to it (link(2)),
 * MESS_EEXIST with nothing written if any name is there, and of several
 * processes creating one path exactly one succeeds (atomicfile.h). */
int statefile_create(const char *path, uint32_t role, const mess_params *p,
                     const uint8_t *raw, size_t raw_len,
                     const char *passphrase, size_t pass_len, unsigned mode);

/* Reads, checks and decompresses a state file of `role`.  With a passphrase
 * the file must be sealed (MESS_EPASS otherwise); without one a sealed file
 * is MESS_EPASS.  *raw is allocated
 * with sodium_malloc-free semantics: release it with statefile_free_raw,
 * which wipes it (client bodies hold keys). */
int statefile_read(const char *path, uint32_t role, const char *passphrase,
                   size_t pass_len, mess_params *p, uint8_t **raw, size_t *raw_len);
void statefile_free_raw(uint8_t *raw, size_t raw_len);

/* The Padme length of len (sealed bodies are padded to it); 0 on overflow. */
size_t statefile_padme(size_t len);

#endif
