/*
 * params.h - public parameters: validation, canonical encoding, fingerprint.
 * Internal header.
 */
#ifndef MESS_PARAMS_H
#define MESS_PARAMS_H

#include "internal.h"

/* Canonical encoding: 13 fields, integers as u32, probabilities as the
 * u64 bit pattern of the IEEE double. */
#define MESS_PARAMS_BYTES 64
#define MESS_FINGERPRINT_BYTES 16

/* A caller's parameters (read within in->size; later fields defaulted)
 * as the library's full struct; MESS_EINVAL for NULL or a size below
 * MESS_PARAMS_MIN_SIZE ("Growable structs" in mess.h).  Every public call
 * taking a const mess_params * goes through it before reading a field. */
int params_import(const mess_params *in, mess_params *out);
/* Writes the library's parameters into a caller's struct of `size` bytes. */
int params_export(const mess_params *p, mess_params *out, size_t size);

void params_encode(const mess_params *p, struct mess_wr *w);
/* Reads and validates (mess_params_check) a parameter block. */
int params_decode(struct mess_rd *r, mess_params *p);
/* BLAKE2b-128 of the canonical encoding with ef_search and train_sample
 * zeroed: equal iff the parameters are, those two tuning fields aside. */
void params_fingerprint(const mess_params *p, uint8_t fp[MESS_FINGERPRINT_BYTES]);
/* 64-bit words per shard code. */
static inline uint32_t params_words(const mess_params *p)
{
    return p->kappa / 64;
}
/* Bytes of the encoded vector inside a payload. */
size_t params_vector_bytes(const mess_params *p);

#endif
