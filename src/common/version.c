/*
 * version.c - the library's version, limits and struct sizes as functions.
 *
 * Each returns the value this library was built with, so a program or a
 * binding (python/mess/_lib.py) can compare it with the header it was
 * compiled against, or read it when it has no header at all.
 */
#include "internal.h"

unsigned mess_version_number(void) { return MESS_VERSION_NUMBER; }
const char *mess_version_string(void) { return MESS_VERSION_STRING; }
const char *mess_version(void) { return MESS_VERSION_STRING; }

size_t mess_max_dim(void) { return MESS_MAX_DIM; }
size_t mess_max_shards(void) { return MESS_MAX_SHARDS; }
size_t mess_max_bits(void) { return MESS_MAX_BITS; }
size_t mess_max_budget(void) { return MESS_MAX_BUDGET; }
size_t mess_max_hnsw_m(void) { return MESS_MAX_HNSW_M; }
size_t mess_max_ef(void) { return MESS_MAX_EF; }
size_t mess_owner_bytes(void) { return MESS_OWNER_BYTES; }
size_t mess_seed_bytes(void) { return MESS_SEED_BYTES; }
uint32_t mess_state_file_version(void) { return MESS_STATE_FILE_VERSION; }

size_t mess_label_bytes(void) { return MESS_LABEL_BYTES; }
uint64_t mess_account_max_repeats(void) { return MESS_ACCOUNT_MAX_REPEATS; }
double mess_account_min_delta(void) { return MESS_ACCOUNT_MIN_DELTA; }
size_t mess_account_max_cells(void) { return MESS_ACCOUNT_MAX_CELLS; }
double mess_account_max_work(void) { return MESS_ACCOUNT_MAX_WORK; }
size_t mess_plan_max_conditional_bits(void) { return MESS_PLAN_MAX_CONDITIONAL_BITS; }
size_t mess_plan_max_check_shards(void) { return MESS_PLAN_MAX_CHECK_SHARDS; }

size_t mess_sizeof_params(void) { return sizeof(mess_params); }
size_t mess_sizeof_finish_stats(void) { return sizeof(mess_finish_stats); }
size_t mess_sizeof_server_stats(void) { return sizeof(mess_server_stats); }
size_t mess_sizeof_account_stored_result(void)
{
    return sizeof(mess_account_stored_result);
}
size_t mess_sizeof_estimate_result(void) { return sizeof(mess_estimate_result); }
