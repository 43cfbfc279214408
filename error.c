/*
 * error.c - status code names and the library version.
 */
#include "internal.h"

const char *mess_version(void)
{
    return MESS_VERSION_STRING;
}

const char *mess_strerror(int code)
{
    switch (code) {
    case MESS_OK:        return "success";
    case MESS_EINVAL:    return "invalid argument";
    case MESS_ENOMEM:    return "out of memory";
    case MESS_EIO:       return "input/output error";
    case MESS_EFORMAT:   return "malformed, truncated or corrupted input";
    case MESS_EVERSION:  return "unsupported format version";
    case MESS_EPARAM:    return "input made for other parameters";
    case MESS_EAUTH:     return "authentication failed";
    case MESS_ENOTFOUND: return "not found";
    case MESS_ELIMIT:    return "size limit exceeded";
    case MESS_ENUMERIC:  return "numerical routine failed";
    case MESS_EROLE:     return "file belongs to the other role";
    case MESS_ECRYPTO:   return "crypto library unavailable";
    case MESS_EPASS:     return "passphrase missing or wrong, or given for an unsealed file";
    case MESS_ESTATE:    return "operation not valid in the current state";
    case MESS_EOWNER:    return "the server belongs to another client";
    default:             return "unknown error";
    }
}
