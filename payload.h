/*
 * payload.h - the encrypted payload stored with every shard entry:
 * id || encoded vector under ChaCha20-Poly1305 (IETF) with the shard's key.
 * Internal header.
 *
 * Entry layout (payload_entry_bytes):  nonce[12] | ciphertext | tag[16]
 * Plaintext:                           id (u64 LE) | vector encoding
 * Associated data:                     "MESSpay1" | shard (u32 LE)
 */
#ifndef MESS_PAYLOAD_H
#define MESS_PAYLOAD_H

#include "params.h"

#define PAYLOAD_NONCE_BYTES 12
#define PAYLOAD_TAG_BYTES 16
#define PAYLOAD_FRESH_BYTES 16

size_t payload_plain_bytes(const mess_params *p);
size_t payload_entry_bytes(const mess_params *p);

/* Vector encodings (MESS_PAYLOAD_*). decode(encode(x)) is exact for f32. */
void payload_encode_vector(const mess_params *p, const float *x, uint8_t *out);
void payload_decode_vector(const mess_params *p, const uint8_t *in, float *x);

/* Encrypts (id, x) for `shard` into entry[payload_entry_bytes].
 * The nonce is synthetic: BLAKE2b(nonce_key; fresh | shard | plaintext),
 * so it is unique whenever `fresh` is (CSPRNG bytes) and, in deterministic
 * mode, never repeats for two different plaintexts even if `fresh` does.
 * plain: scratch of payload_plain_bytes. */
void payload_seal(const mess_params *p, const uint8_t key[32],
                  const uint8_t nonce_key[32], uint32_t shard, uint64_t id,
                  const float *x, const uint8_t fresh[PAYLOAD_FRESH_BYTES],
                  uint8_t *plain, uint8_t *entry);

/* Authenticates and decrypts an entry of `shard`: MESS_OK with *id and x
 * filled, or MESS_EAUTH.  plain: scratch of payload_plain_bytes. */
int payload_open(const mess_params *p, const uint8_t key[32], uint32_t shard,
                 const uint8_t *entry, uint8_t *plain, uint64_t *id, float *x);

/* IEEE 754 half precision conversions (round to nearest, ties to even). */
uint16_t payload_f32_to_f16(float f);
float payload_f16_to_f32(uint16_t h);

#endif
