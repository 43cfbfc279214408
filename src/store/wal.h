/*
 * wal.h - the write-ahead log of a directory-backed server (decision D16,
 * docs/PROTOCOL.md "Write-ahead log").  Internal header.
 *
 * The log holds the upload and delete buffers a server has validated and
 * applied since its manifest's generation, one record each:
 *
 *   offset  0  magic       u32  0x314c574d ("MWL1": format 1)
 *           4  kind        u32  1 upload, 2 delete, 3 compaction
 *           8  generation  u64  the manifest generation it follows
 *          16  seq         u64  0, 1, 2, ... within the generation
 *          24  len         u64  body bytes, at most WAL_MAX_BODY
 *          32  body        len bytes (the buffer as the client sent it)
 *    32 + len  sum         BLAKE2b-256 of the 32 + len bytes before it
 *
 * An append is one write (writev; repeated only if the kernel writes part
 * of it) and one fdatasync: once it returns MESS_OK the record survives a
 * crash.  Reading treats the file as hostile: every length is checked
 * against the bytes present and WAL_MAX_BODY before use, and nothing is
 * allocated from a length (the file is mapped; records point into it).
 *
 * Reading a log for manifest generation G (wal_scan):
 *   - complete records (checksum right) must all be of one generation L,
 *     with seq 0, 1, 2, ...; L > G, a second generation, a gap or a
 *     repeat in seq, or an unknown kind are MESS_EFORMAT (the message says
 *     at which byte);
 *   - L < G: the log is stale (a crash after a checkpoint renamed the
 *     manifest but before it replaced the log; those records are in the
 *     shard files already): nothing to replay;
 *   - the first damaged record (short, wrong magic, impossible length,
 *     wrong checksum) ends the log: if no complete record follows it
 *     anywhere, it and everything after it are a torn tail, cut (the
 *     count of bytes is reported); if one does, the log is corrupt
 *     (MESS_EFORMAT, "... damaged at byte X, a complete record follows at
 *     byte Y").  The search for a following record hashes at most
 *     2 x (bytes after X) + 1 MiB in candidates; a file needing more is
 *     refused as corrupt, so a hostile file cannot make it quadratic.
 *   - an empty or missing log is an empty log of any generation.
 */
#ifndef MESS_WAL_H
#define MESS_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define WAL_MAGIC 0x314c574dU /* "MWL1" */
#define WAL_UPLOAD 1U
#define WAL_DELETE 2U
#define WAL_COMPACT 3U /* mess_server_compact; empty body */
#define WAL_HEAD_BYTES 32
#define WAL_SUM_BYTES 32
#define WAL_OVERHEAD (WAL_HEAD_BYTES + WAL_SUM_BYTES)
/* Largest body a record may hold (1 TiB); a larger append is MESS_ELIMIT. */
#define WAL_MAX_BODY ((uint64_t)1 << 40)

/* One record of a scanned log; body points into the scanned bytes. */
struct wal_record {
    uint32_t kind;
    uint64_t seq;
    const uint8_t *body;
    size_t len;
    size_t offset; /* of its first byte in the log */
};

/* What wal_scan found. */
struct wal_scan {
    size_t valid;     /* bytes of complete records: the prefix kept */
    size_t cut;       /* bytes after it (torn or garbled tail), cut */
    uint64_t records; /* complete records */
    uint64_t log_gen; /* their generation (0 if none) */
    int stale;        /* log_gen < the generation asked for: replay nothing */
};

/* Checks the len bytes of a log against manifest generation gen (the
 * rules above).  MESS_OK with *out filled, or MESS_EFORMAT with a message
 * in msg (cap bytes, may be NULL / 0) and *out zeroed. */
int wal_scan(const uint8_t *buf, size_t len, uint64_t gen, struct wal_scan *out,
             char *msg, size_t cap);

/* The record at *pos of a log wal_scan accepted (start with *pos = 0):
 * 1 with *rec filled and *pos advanced, 0 at the end of the valid prefix
 * (and always 0 for a stale log). */
int wal_scan_next(const uint8_t *buf, const struct wal_scan *sc, size_t *pos,
                  struct wal_record *rec);

/* Appends the bytes of one record to w (tests, fuzz seeds).  w's sticky
 * error is set on failure; a body over WAL_MAX_BODY sets MESS_ELIMIT. */
void wal_encode(struct mess_wr *w, uint32_t kind, uint64_t gen, uint64_t seq,
                const uint8_t *body, size_t len);

/* ---- the log file --------------------------------------------------------- */

struct wal;

#define WAL_READONLY 1U /* open only to read: never created or changed */

/* Opens the log at path for manifest generation gen and scans it (the
 * file is not changed yet: a failed open or replay leaves it as it was).
 * A missing file is an empty log (created, with a directory fsync, unless
 * WAL_READONLY).  A log or directory this process may not write (EACCES,
 * EPERM, EROFS) is opened read-only (wal_writable says so).  MESS_OK,
 * MESS_EFORMAT (message in msg), MESS_EIO, MESS_ENOMEM; on error *out is
 * NULL. */
int wal_open(const char *path, uint64_t gen, unsigned flags, struct wal **out,
             char *msg, size_t cap);

/* What the scan found (records, bytes cut, stale). */
const struct wal_scan *wal_info(const struct wal *w);
/* The header of the torn record a scan found past the valid prefix (for
 * mess_server_verify to say what an open drops): 1 with its kind, seq and
 * body length if its first WAL_HEAD_BYTES bytes are there with the magic,
 * else 0 (no tail, a shorter one, or garbage). */
int wal_torn_head(const struct wal *w, uint32_t *kind, uint64_t *seq, uint64_t *len);

/* Replay: the complete records of generation gen in seq order, 1 per
 * record, then 0.  The body stays valid until wal_ready or wal_close. */
int wal_replay_next(struct wal *w, struct wal_record *rec);

/* Ends the replay (the mapping goes).  The file is not changed: a handle
 * that only reads never writes the log, so opens in other processes
 * cannot cut what a writer is appending. */
int wal_ready(struct wal *w);

/* Makes the log this handle's to append to, once, before its first
 * append; the caller holds the directory's writer claim (server_store.c).
 * Refused with MESS_ESTATE (errno ESTALE) if the file was replaced or
 * changed in size since this handle scanned it (another handle appended
 * or checkpointed: its records would be overwritten or orphaned).  Then
 * a cut tail is truncated away and a stale log replaced by an empty one
 * for gen (both made durable).  MESS_OK, MESS_ESTATE, MESS_EINVAL
 * (read-only, before wal_ready), MESS_EIO. */
int wal_claim(struct wal *w);

/* 1 if appends are possible (not opened or fallen back to read-only). */
int wal_writable(const struct wal *w);
/* The errno (EACCES, EPERM, EROFS) that made a writable open fall back to
 * read-only, 0 if it did not. */
int wal_readonly_errno(const struct wal *w);

/* Appends one record (one writev + fdatasync) after wal_claim.  If it fails
 * the file is cut back to where it was (else every later append is refused:
 * MESS_EIO until the server is reopened).  MESS_OK, MESS_EINVAL (kind,
 * read-only, before wal_claim), MESS_ELIMIT (len > WAL_MAX_BODY), MESS_EIO. */
int wal_append(struct wal *w, uint32_t kind, const uint8_t *body, size_t len);

/* Checkpoint: replaces the log by an empty one for generation gen (a
 * temporary, fsync, rename, directory fsync) once the manifest of gen is
 * durable.  MESS_OK or MESS_EIO (the log is then refused for appends). */
int wal_reset(struct wal *w, uint64_t gen);

/* Records in the log now (replayed + appended) and its size in bytes. */
uint64_t wal_count(const struct wal *w);
uint64_t wal_size(const struct wal *w);
uint64_t wal_generation(const struct wal *w);

void wal_close(struct wal *w);

#endif
