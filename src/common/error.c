/*
 * error.c - status code descriptions and names.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

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
    case MESS_ESTATE:    return "not valid in the current state (e.g. item already stored)";
    case MESS_EOWNER:    return "the server belongs to another client";
    case MESS_EEXIST:    return "file exists (not replaced)";
    case MESS_EBUSY:     return "another process is writing this directory";
    default:             return "unknown error";
    }
}

const char *mess_error_name(int code)
{
    switch (code) {
    case MESS_OK:        return "MESS_OK";
    case MESS_EINVAL:    return "MESS_EINVAL";
    case MESS_ENOMEM:    return "MESS_ENOMEM";
    case MESS_EIO:       return "MESS_EIO";
    case MESS_EFORMAT:   return "MESS_EFORMAT";
    case MESS_EVERSION:  return "MESS_EVERSION";
    case MESS_EPARAM:    return "MESS_EPARAM";
    case MESS_EAUTH:     return "MESS_EAUTH";
    case MESS_ENOTFOUND: return "MESS_ENOTFOUND";
    case MESS_ELIMIT:    return "MESS_ELIMIT";
    case MESS_ENUMERIC:  return "MESS_ENUMERIC";
    case MESS_EROLE:     return "MESS_EROLE";
    case MESS_ECRYPTO:   return "MESS_ECRYPTO";
    case MESS_EPASS:     return "MESS_EPASS";
    case MESS_ESTATE:    return "MESS_ESTATE";
    case MESS_EOWNER:    return "MESS_EOWNER";
    case MESS_EEXIST:    return "MESS_EEXIST";
    case MESS_EBUSY:     return "MESS_EBUSY";
    default:             return NULL;
    }
}

void mess_say(char *msg, size_t cap, const char *fmt, ...)
{
    va_list ap;
    if (!msg || cap == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
}

int mess_fail(char *msg, size_t cap, int rc, const char *fmt, ...)
{
    va_list ap;
    if (msg && cap) {
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

const char *mess_base_name(const char *path)
{
    const char *q = strrchr(path, '/');
    return q ? q + 1 : path;
}
