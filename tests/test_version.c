/*
 * test_version.c - the header and the library agree: version macros and
 * functions, every limit constant and its function, the status codes'
 * names, and the public structs' sizes (what python/mess/_lib.py reads at
 * load time to refuse a mismatched library).
 */
#include <stdio.h>

#include "../mess_experimental.h"
#include "harness.h"

static void test_version(void)
{
    char want[32];
    CHECK(MESS_VERSION_NUMBER == MESS_VERSION_MAJOR * 10000 + MESS_VERSION_MINOR * 100
                                 + MESS_VERSION_PATCH);
    CHECK(mess_version_number() == MESS_VERSION_NUMBER);
    snprintf(want, sizeof want, "%d.%d.%d", MESS_VERSION_MAJOR, MESS_VERSION_MINOR,
             MESS_VERSION_PATCH);
    CHECK(strcmp(MESS_VERSION_STRING, want) == 0);
    CHECK(strcmp(mess_version_string(), MESS_VERSION_STRING) == 0);
    CHECK(strcmp(mess_version(), MESS_VERSION_STRING) == 0);
}

static void test_limits(void)
{
    CHECK(mess_max_dim() == MESS_MAX_DIM);
    CHECK(mess_max_shards() == MESS_MAX_SHARDS);
    CHECK(mess_max_bits() == MESS_MAX_BITS);
    CHECK(mess_max_budget() == MESS_MAX_BUDGET);
    CHECK(mess_max_hnsw_m() == MESS_MAX_HNSW_M);
    CHECK(mess_max_ef() == MESS_MAX_EF);
    CHECK(mess_max_threads() == MESS_MAX_THREADS);
    CHECK(mess_owner_bytes() == MESS_OWNER_BYTES);
    CHECK(mess_seed_bytes() == MESS_SEED_BYTES);
    CHECK(mess_state_file_version() == MESS_STATE_FILE_VERSION);
    CHECK(mess_label_bytes() == MESS_LABEL_BYTES);
    CHECK(mess_account_max_repeats() == MESS_ACCOUNT_MAX_REPEATS);
    CHECK(mess_account_min_delta() == MESS_ACCOUNT_MIN_DELTA);
    CHECK(mess_account_max_cells() == MESS_ACCOUNT_MAX_CELLS);
    CHECK(mess_account_max_work() == MESS_ACCOUNT_MAX_WORK);
    CHECK(mess_plan_max_conditional_bits() == MESS_PLAN_MAX_CONDITIONAL_BITS);
    CHECK(mess_plan_max_check_shards() == MESS_PLAN_MAX_CHECK_SHARDS);
}

static void test_struct_sizes(void)
{
    CHECK(mess_sizeof_params() == sizeof(mess_params));
    CHECK(mess_sizeof_finish_stats() == sizeof(mess_finish_stats));
    CHECK(mess_sizeof_server_stats() == sizeof(mess_server_stats));
    CHECK(mess_sizeof_account_stored_result() == sizeof(mess_account_stored_result));
    CHECK(mess_sizeof_estimate_result() == sizeof(mess_estimate_result));
}

/* Every code the header defines has its macro's name and a description;
 * the first code past the last one has neither. */
static void test_error_names(void)
{
    static const struct { int code; const char *name; } codes[] = {
        {MESS_OK, "MESS_OK"}, {MESS_EINVAL, "MESS_EINVAL"},
        {MESS_ENOMEM, "MESS_ENOMEM"}, {MESS_EIO, "MESS_EIO"},
        {MESS_EFORMAT, "MESS_EFORMAT"}, {MESS_EVERSION, "MESS_EVERSION"},
        {MESS_EPARAM, "MESS_EPARAM"}, {MESS_EAUTH, "MESS_EAUTH"},
        {MESS_ENOTFOUND, "MESS_ENOTFOUND"}, {MESS_ELIMIT, "MESS_ELIMIT"},
        {MESS_ENUMERIC, "MESS_ENUMERIC"}, {MESS_EROLE, "MESS_EROLE"},
        {MESS_ECRYPTO, "MESS_ECRYPTO"}, {MESS_EPASS, "MESS_EPASS"},
        {MESS_ESTATE, "MESS_ESTATE"}, {MESS_EOWNER, "MESS_EOWNER"},
        {MESS_EEXIST, "MESS_EEXIST"}, {MESS_EBUSY, "MESS_EBUSY"},
    };
    size_t i, n = sizeof codes / sizeof codes[0];
    for (i = 0; i < n; i++) {
        const char *got = mess_error_name(codes[i].code);
        CHECK(codes[i].code == -(int)i);
        CHECK(got && strcmp(got, codes[i].name) == 0);
        CHECK(strcmp(mess_strerror(codes[i].code), "unknown error") != 0);
    }
    CHECK(mess_error_name(-(int)n) == NULL);
    CHECK(mess_error_name(1) == NULL);
    CHECK(strcmp(mess_strerror(-(int)n), "unknown error") == 0);
}

int main(void)
{
    RUN(test_version);
    RUN(test_limits);
    RUN(test_struct_sizes);
    RUN(test_error_names);
    HARNESS_END();
}
