/*
 * poly1305_lanes.h - Poly1305 of many messages at once, each under its own
 * key, in SIMD lanes (internal).
 *
 * libsodium hashes one message per call at about 0.25 ns per byte plus
 * ~75 ns of init, update and final per call; a response's openings are
 * ~1,000 messages of 536 bytes.  Here the 26-bit-limb products of 8
 * (AVX-512F) or 4 (AVX2) messages run in the 64-bit lanes of one register,
 * two registers interleaved, each lane Horner's rule h = (h + m) r mod
 * 2^130 - 5 under its own r; the final reduction and the addition of s run
 * per lane in constant time.  The tags are crypto_onetimeauth_poly1305's
 * bit for bit (tests/test_poly1305_lanes.c: random keys, every length
 * 0..1100, misaligned buffers, values next to 2^130 - 5, RFC 8439's
 * vector).  No branch, index or exit depends on a key or a message byte;
 * only the public lengths and counts shape the work.  Without AVX2 (or
 * when forced) every message goes through libsodium.
 */
#ifndef MESS_POLY1305_LANES_H
#define MESS_POLY1305_LANES_H

#include <stddef.h>
#include <stdint.h>

/* tag[i] = crypto_onetimeauth_poly1305(head[i] || msg[i], key[i]) for
 * i < n: head[i] is head_len bytes (a multiple of 16, or every message
 * goes through libsodium; head may be NULL when head_len is 0), msg[i]
 * len bytes; key[i] 32 bytes (r | s, used once per message as Poly1305
 * requires of a one-time key, or as a fixed hash key under a PRF). */
void poly1305_many(size_t n, const uint8_t *const *key, const uint8_t *const *head,
                   size_t head_len, const uint8_t *const *msg, size_t len,
                   uint8_t (*tag)[16]);

/* Which path runs: 0 libsodium one message at a time, 1 AVX2 (4 lanes per
 * register), 2 AVX-512F (8): what the CPU has, or what was forced. */
int poly1305_lanes_isa(void);

/* -1: the CPU decides (default); 0, 1, 2: that path (MESS_EINVAL if the
 * CPU lacks it).  For tests and benchmarks; not thread-safe.  The one
 * table of these choices: SIMD_POLY1305 in src/common/simd.h. */
int poly1305_lanes_force(int isa);

#endif
