/*
 * payload.h - the encrypted payload stored with every shard entry:
 * id || encoded vector, sealed per shard by a synthetic-IV AEAD.
 * Internal header.
 *
 * Entry layout (payload_entry_bytes):  siv[16] | ciphertext
 * Plaintext:                           id (u64 LE) | vector encoding
 * Associated data:                     "MESSpay4" | shard (u32 LE) |
 *                                      generation (u32 LE)
 * The generation is the item's client-side version (client_core.c): an item
 * deleted and inserted again is sealed under another AD, so its new
 * entries share no ciphertext with the old ones even for the same vector,
 * and an old entry does not open as the current one.
 *
 * SIV construction (Rogaway and Shrimpton's deterministic AE, the pattern
 * of AES-GCM-SIV, RFC 8452, on libsodium's ChaCha family):
 *   h   = Poly1305 polynomial hash under k_mac of AD || plaintext
 *   siv = first 16 bytes of HChaCha20(k_prf, h)          (a PRF of AD || P)
 *   c   = 30 bits of siv[12..16), nonce = siv[0..12)
 *   ct  = id XOR ChaCha20(k_enc, nonce, block c)[0..8)
 *         | vector XOR ChaCha20(k_enc, nonce, blocks c+1, c+2, ...)
 * Opening decrypts with the siv, recomputes it from AD || plaintext and
 * compares in constant time.  The IV is a PRF of the whole plaintext; no
 * nonce is stored and none can be reused.  Two different plaintexts of L
 * keystream blocks each (block c and the vector's blocks) share keystream
 * only if their nonces agree and their block windows overlap
 * (|c1 - c2| <= L - 1): probability at most (2L - 1) 2^-126 per pair for
 * a random SIV (docs/PROTOCOL.md, "Keystream collisions").  Known-answer
 * vectors: tests/payload_kat.h (scripts/payload_kat.py).
 */
#ifndef MESS_PAYLOAD_H
#define MESS_PAYLOAD_H

#include "params.h"

#define PAYLOAD_SIV_BYTES 16
#define PAYLOAD_KEY_BYTES 32
#define PAYLOAD_AD_BYTES 16

/* The context every seal and open binds: shard | generation << 32 (the AD's
 * last 8 bytes, little-endian).  A bare shard number is generation 0. */
static inline uint64_t payload_ctx(uint32_t shard, uint32_t generation)
{
    return (uint64_t)shard | (uint64_t)generation << 32;
}

/* The three independent keys of one shard (derived by the caller). */
struct payload_keys {
    uint8_t enc[PAYLOAD_KEY_BYTES]; /* ChaCha20 */
    uint8_t mac[PAYLOAD_KEY_BYTES]; /* Poly1305 hash key (r | s) */
    uint8_t prf[PAYLOAD_KEY_BYTES]; /* HChaCha20 */
};

size_t payload_plain_bytes(const mess_params *p);
size_t payload_entry_bytes(const mess_params *p);

/* Vector encodings (MESS_PAYLOAD_*). decode(encode(x)) is exact for f32,
 * and for u8 on every vector payload_unencodable accepts. */
void payload_encode_vector(const mess_params *p, const float *x, uint8_t *out);
/* The first component of x the encoding cannot hold exactly, or p->dim if
 * it holds them all: under MESS_PAYLOAD_U8 a component that is not an
 * integer in [0, 255]; the other encodings take every finite vector. */
size_t payload_unencodable(const mess_params *p, const float *x);
void payload_decode_vector(const mess_params *p, const uint8_t *in, float *x);

/* Seals (id, x) for context ctx (payload_ctx) into entry[payload_entry_bytes].
 * plain: scratch of payload_plain_bytes (left holding the plaintext). */
void payload_seal(const mess_params *p, const struct payload_keys *k,
                  uint64_t ctx, uint64_t id, const float *x, uint8_t *plain,
                  uint8_t *entry);

/* Authenticates and decrypts an entry of context ctx into plain
 * [payload_plain_bytes]: MESS_OK, or MESS_EAUTH with plain wiped. */
int payload_open_raw(const mess_params *p, const struct payload_keys *k,
                     uint64_t ctx, const uint8_t *entry, uint8_t *plain);

/* The id an entry claims, decrypted WITHOUT authentication (16 bytes of
 * keystream, a third of the cost of one ChaCha20 block call).  A hint only:
 * it tells which copies in a response claim the same id so the client opens
 * one of them; nothing from it is ever returned before payload_open_raw
 * authenticates the entry. */
uint64_t payload_peek_id(const struct payload_keys *k, const uint8_t *entry);

/* payload_open_raw for an entry whose id was already peeked: the same
 * result, one HChaCha20 less. */
int payload_open_peeked(const mess_params *p, const struct payload_keys *k,
                        uint64_t ctx, const uint8_t *entry, uint64_t id,
                        uint8_t *plain);

/* payload_open_raw, then *id and the decoded vector x. */
int payload_open(const mess_params *p, const struct payload_keys *k,
                 uint64_t ctx, const uint8_t *entry, uint8_t *plain,
                 uint64_t *id, float *x);

/* Batched forms: the ChaCha20 and HChaCha20 blocks of many entries run
 * side by side in chacha_lanes.c's SIMD core, and their Poly1305 hashes
 * in poly1305_lanes.c's, instead of one libsodium call per block and
 * message; results bit for bit those of the one-entry calls above
 * (tests/test_payload_batch.c, on every core the CPU has). */

/* id[i] = payload_peek_id(k[i], entry[i]) for i < n. */
void payload_peek_ids(size_t n, const struct payload_keys *const *k,
                      const uint8_t *const *entry, uint64_t *id);

/* At most this many entries per payload_open_peeked_many call. */
#define PAYLOAD_BATCH 32

/* The vectors of n entries decrypted into plain + i * payload_plain_bytes
 * + 8 (the keystream step of opening; no authentication). */
void payload_vector_xor_many(const mess_params *p, size_t n,
                             const struct payload_keys *const *k,
                             const uint8_t *const *entry, uint8_t *plain);

/* ok[i] = payload_open_peeked(p, k[i], ctx[i], entry[i], id[i],
 * plain + i * payload_plain_bytes(p)) == MESS_OK for i < n <= PAYLOAD_BATCH
 * (a failed entry's plaintext wiped). */
void payload_open_peeked_many(const mess_params *p, size_t n,
                              const struct payload_keys *const *k,
                              const uint64_t *ctx, const uint8_t *const *entry,
                              const uint64_t *id, uint8_t *plain, int *ok);

/* IEEE 754 half precision conversions (round to nearest, ties to even). */
uint16_t payload_f32_to_f16(float f);
float payload_f16_to_f32(uint16_t h);
/* dim halves (little-endian) to floats, with F16C where the CPU has it
 * (SIMD_F16 in simd.h): the same bits as payload_f16_to_f32 on each. */
void payload_f16_decode(const uint8_t *in, uint32_t dim, float *x);
/* dim bytes to floats (u8 payloads), 16 at a time with SSE2 where the
 * compiler targets it. */
void payload_u8_decode(const uint8_t *in, uint32_t dim, float *x);

#endif
