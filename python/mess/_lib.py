"""Loading libmess.so, the C prototypes, and status codes -> exceptions.

The shared library is looked up, first match wins:
  1. the path in the environment variable MESS_LIBRARY;
  2. libmess.so next to this package, then the source tree's
     build/libmess.so (python/mess/ -> ../../build/), then the library of
     the prefix `make install` put this package under
     (PREFIX/lib/python3/dist-packages/mess/ -> PREFIX/lib/libmess.so.0);
  3. an installed library: the system's linker path (the Debian package
     libmess0; ctypes.util.find_library("mess"), then libmess.so.0, which
     honours LD_LIBRARY_PATH), then /usr/local/lib/libmess.so.0 (`make
     install` before ldconfig has run).
A package installed with pip (not -e) has no build tree next to it: it uses
MESS_LIBRARY or an installed library.  `path` is the file actually loaded.
"""
import ctypes
import ctypes.util
import os

from ctypes import (POINTER, c_char_p, c_double, c_int, c_size_t, c_uint,
                    c_uint32, c_uint64, c_uint8, c_void_p)

_HERE = os.path.dirname(os.path.abspath(__file__))


class mess_params(ctypes.Structure):
    """Mirror of struct mess_params (mess.h)."""
    _fields_ = [
        ("size", c_uint32),  # ctypes.sizeof of the Structure (mess.h, "Growable structs")
        ("dim", c_uint32),
        ("metric", c_uint32),
        ("kappa", c_uint32),
        ("shards", c_uint32),
        ("per_item", c_uint32),
        ("p_store", c_double),
        ("p_prr", c_double),
        ("p_irr", c_double),
        ("hnsw_m", c_uint32),
        ("ef_construction", c_uint32),
        ("ef_search", c_uint32),
        ("payload", c_uint32),
        ("train_sample", c_uint32),
    ]


class mess_finish_stats(ctypes.Structure):
    _fields_ = [
        ("size", c_uint32),  # ctypes.sizeof of the Structure (mess.h, "Growable structs")
        ("candidates", c_size_t),
        ("unique", c_size_t),
        ("auth_failures", c_size_t),
        ("unopened", c_size_t),
    ]


class mess_server_stats(ctypes.Structure):
    _fields_ = [
        ("size", c_uint32),  # ctypes.sizeof of the Structure (mess.h, "Growable structs")
        ("entries", c_size_t),
        ("live", c_size_t),
        ("deleted", c_size_t),
        ("bytes", c_size_t),
        ("min_shard", c_size_t),
        ("max_shard", c_size_t),
    ]


class mess_account_stored_result(ctypes.Structure):
    """Mirror of struct mess_account_stored_result (mess_experimental.h)."""
    _fields_ = [("size", c_uint32),  # mess.h, "Growable structs" (mess_account_stored_sized)
                ("eta", c_double), ("u_max", c_uint64), ("u_mean", c_double),
                ("xi_pure", c_double), ("xi_pld", c_double)]


class mess_plan_candidate(ctypes.Structure):
    """Mirror of mess_plan_candidate (mess_experimental.h)."""
    _fields_ = [("size", c_uint32), ("shards", c_uint32), ("per_item", c_uint32),
                ("bits", c_uint32), ("payload", c_uint32), ("store_bound", c_uint32),
                ("query_bound", c_uint32), ("p_store", c_double), ("p_query", c_double),
                ("p_prr", c_double), ("xi_store", c_double), ("xi_query", c_double),
                ("xi_cap", c_double), ("xi_shard", c_double), ("pool", c_size_t),
                ("recall", c_double), ("bytes", c_double), ("curve", c_void_p)]


PLAN_CANDIDATE_FN = ctypes.CFUNCTYPE(None, c_void_p, POINTER(mess_plan_candidate))


class mess_plan_choose_in(ctypes.Structure):
    """Mirror of struct mess_plan_choose_in (mess_experimental.h)."""
    _fields_ = [("size", c_uint32),  # mess.h, "Growable structs": set by the caller
                ("k", c_uint32), ("base", POINTER(mess_params)),
                ("train", c_void_p), ("ntrain", c_size_t),
                ("data", c_void_p), ("n", c_size_t),
                ("queries", c_void_p), ("nq", c_size_t),
                ("truth", c_void_p),
                ("target_recall", c_double), ("max_bytes", c_double),
                ("max_xi", c_double), ("max_xi_query", c_double),
                ("max_xi_cap", c_double), ("max_xi_shard", c_double),
                ("grid_shards", c_void_p), ("n_grid_shards", c_size_t),
                ("grid_per_item", c_void_p), ("n_grid_per_item", c_size_t),
                ("grid_bits", c_void_p), ("n_grid_bits", c_size_t),
                ("pools", c_void_p), ("npools", c_size_t),
                ("check_shards", c_uint32), ("check_queries", c_uint32),
                ("choose_payload", c_uint32), ("threads", c_uint32),
                ("seed", c_void_p),
                ("on_candidate", PLAN_CANDIDATE_FN), ("ctx", c_void_p)]


class mess_plan_choice(ctypes.Structure):
    """Mirror of mess_plan_choice (mess_experimental.h)."""
    _fields_ = [("size", c_uint32), ("found", c_uint32), ("candidates", c_size_t),
                ("max_xi", c_double), ("max_xi_query", c_double),
                ("max_xi_cap", c_double), ("max_xi_shard", c_double),
                ("payload_recall", c_double * 4),
                ("best", mess_plan_candidate), ("params", mess_params)]


# ---- errors -----------------------------------------------------------------

class MessError(Exception):
    """A libmess call failed: .code is the MESS_E* status (negative int),
    .message the library's mess_strerror() text, .function the C function."""

    def __init__(self, code, message, function=None):
        self.code = code
        self.message = message
        self.function = function
        where = "%s: " % function if function else ""
        super().__init__("%s%s (%s)" % (where, message, CODE_NAMES.get(code, code)))


class InvalidArgumentError(MessError, ValueError):
    pass


class OutOfMemoryError(MessError, MemoryError):
    pass


class IOFailureError(MessError, OSError):
    pass


class FormatError(MessError, ValueError):
    pass


class VersionError(MessError, ValueError):
    pass


class ParamsMismatchError(MessError, ValueError):
    pass


class AuthenticationError(MessError):
    pass


class NotFoundError(MessError, LookupError):
    pass


class LimitError(MessError, ValueError):
    pass


class NumericError(MessError, ArithmeticError):
    pass


class RoleError(MessError, ValueError):
    pass


class CryptoInitError(MessError):
    pass


class PassphraseError(MessError):
    pass


class StateError(MessError):
    pass


class OwnerError(MessError):
    """The server belongs to another client (MESS_EOWNER)."""
    pass


class AlreadyExistsError(MessError, FileExistsError):
    """A file the call creates without replacing exists (MESS_EEXIST):
    Client.save(path, exist_ok=False).  A FileExistsError, with .errno
    (EEXIST), .strerror and .filename set; the file is left as it was."""
    pass


class BusyError(MessError):
    """Another process (or another handle of this one) is writing the
    server directory: it holds the directory's writer claim (MESS_EBUSY).
    Nothing was changed; try again when that writer is done.  Not a
    StateError: the handle and the items are fine."""
    pass


CODE_NAMES = {
    -1: "MESS_EINVAL", -2: "MESS_ENOMEM", -3: "MESS_EIO", -4: "MESS_EFORMAT",
    -5: "MESS_EVERSION", -6: "MESS_EPARAM", -7: "MESS_EAUTH",
    -8: "MESS_ENOTFOUND", -9: "MESS_ELIMIT", -10: "MESS_ENUMERIC",
    -11: "MESS_EROLE", -12: "MESS_ECRYPTO", -13: "MESS_EPASS",
    -14: "MESS_ESTATE", -15: "MESS_EOWNER", -16: "MESS_EEXIST",
    -17: "MESS_EBUSY",
}

EIO = -3
ENOTFOUND = -8
ESTATE = -14
EOWNER = -15

_ERROR_CLASSES = {
    -1: InvalidArgumentError, -2: OutOfMemoryError, -3: IOFailureError,
    -4: FormatError, -5: VersionError, -6: ParamsMismatchError,
    -7: AuthenticationError, -8: NotFoundError, -9: LimitError,
    -10: NumericError, -11: RoleError, -12: CryptoInitError,
    -13: PassphraseError, -14: StateError, -15: OwnerError,
    -16: AlreadyExistsError, -17: BusyError,
}


def _candidates():
    env = os.environ.get("MESS_LIBRARY")
    if env:
        yield env
        return
    yield os.path.join(_HERE, "libmess.so")
    yield os.path.normpath(os.path.join(_HERE, "..", "..", "build", "libmess.so"))
    yield os.path.normpath(os.path.join(_HERE, "..", "..", "..", "libmess.so.0"))
    found = ctypes.util.find_library("mess")
    if found:
        yield found
    yield "libmess.so.0"
    yield "/usr/local/lib/libmess.so.0"


def _loaded_path(name):
    """The file the dynamic linker chose for a bare name (its mapping)."""
    if os.sep in name:
        return name
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                file = line.split(None, 5)[-1].strip()
                if os.path.basename(file).startswith(name.split(".so")[0] + ".so"):
                    return file
    except OSError:
        pass
    return name


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append("%s: no such file" % path)
            continue
        try:
            return ctypes.CDLL(path, use_errno=True), _loaded_path(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("libmess.so not found: set MESS_LIBRARY to its path, run `make` in "
                      "the source tree (editable install), or install the library (make "
                      "install, or the libmess0 package); tried: " + "; ".join(errors))


lib, path = _load()


# ---- what these bindings were written for -----------------------------------
# The values of mess.h / mess_experimental.h these bindings assume.  At
# import, check_library compares them with what the loaded library reports
# (mess_version_number, the limit functions, mess_error_name, the
# mess_sizeof_* functions) and refuses a library that differs; the limits
# the package exports (mess.MAX_SHARDS, ...) are the library's.
# python/tests/test_library_check.py compares these with the headers.

VERSION_NUMBER = 300  # MESS_VERSION_NUMBER (0.3.0): any 0.3.x library is accepted

LIMITS = {  # name without MESS_ -> value
    "MAX_DIM": 65536,
    "MAX_SHARDS": 1024,
    "MAX_BITS": 4096,
    "MAX_BUDGET": 65535,
    "MAX_HNSW_M": 256,
    "MAX_EF": 65535,
    "MAX_THREADS": 256,
    "OWNER_BYTES": 16,
    "SEED_BYTES": 32,
    "STATE_FILE_VERSION": 3,
    "QUERY_STATE_VERSION": 1,
    "LABEL_BYTES": 16,
    "ACCOUNT_MAX_REPEATS": 1 << 53,
    "ACCOUNT_MIN_DELTA": 1e-20,
    "ACCOUNT_MAX_CELLS": 1 << 24,
    "ACCOUNT_MAX_WORK": 4294967296.0,
    "PLAN_MAX_CONDITIONAL_BITS": 1024,
    "PLAN_MAX_CHECK_SHARDS": 64,
}

_LIMIT_TYPES = {"STATE_FILE_VERSION": c_uint32, "QUERY_STATE_VERSION": c_uint32,
                "ACCOUNT_MAX_REPEATS": c_uint64,
                "ACCOUNT_MIN_DELTA": c_double, "ACCOUNT_MAX_WORK": c_double}

STRUCTS = {  # C function reporting the library's sizeof -> ctypes mirror
    "mess_sizeof_params": mess_params,
    "mess_sizeof_finish_stats": mess_finish_stats,
    "mess_sizeof_server_stats": mess_server_stats,
    "mess_sizeof_account_stored_result": mess_account_stored_result,
    "mess_sizeof_plan_choice": mess_plan_choice,
}


def _version_text(n):
    return "%d.%d.%d" % (n // 10000, n // 100 % 100, n % 100)


def check_library(lib, path, version_number=None, limits=None, codes=None,
                  structs=None):
    """Compares the loaded library with what these bindings assume and
    returns its limits ({name: value}); raises ImportError naming every
    difference.  The keyword arguments replace the expected values (tests
    pass deliberately wrong ones to see the refusal)."""
    version_number = VERSION_NUMBER if version_number is None else version_number
    limits = LIMITS if limits is None else limits
    codes = CODE_NAMES if codes is None else codes
    structs = STRUCTS if structs is None else structs
    want = _version_text(version_number)
    if not hasattr(lib, "mess_version_number"):
        raise ImportError("%s is a libmess older than 0.2.0 (it has no mess_version_number); "
                          "these Python bindings need libmess %s.x: build it (make) or set "
                          "MESS_LIBRARY to a matching libmess.so" % (path, want[:want.rindex(".")]))
    f = lib.mess_version_number
    f.restype, f.argtypes = ctypes.c_uint, []
    got = f()
    if got // 100 != version_number // 100:
        raise ImportError("%s is libmess %s (version number %d); these Python bindings are "
                          "for libmess %s.x (%d): install the bindings of the same release, or "
                          "set MESS_LIBRARY to a matching libmess.so"
                          % (path, _version_text(got), got, want[:want.rindex(".")],
                             version_number))
    problems = []
    found = {}
    for name, value in limits.items():
        fname = "mess_" + name.lower()
        if not hasattr(lib, fname):
            problems.append("%s() missing" % fname)
            continue
        f = getattr(lib, fname)
        f.restype, f.argtypes = _LIMIT_TYPES.get(name, c_size_t), []
        found[name] = f()
        if found[name] != value:
            problems.append("MESS_%s is %r in the library, %r in the bindings"
                            % (name, found[name], value))
    name_of = lib.mess_error_name
    name_of.restype, name_of.argtypes = c_char_p, [c_int]
    for code, name in sorted(codes.items(), reverse=True):
        lname = name_of(code)
        lname = lname.decode() if lname is not None else None
        if lname != name:
            problems.append("status code %d is %s in the library, %s in the bindings"
                            % (code, lname, name))
    past = min(codes) - 1 if codes else -1
    extra = name_of(past)
    if extra is not None:
        problems.append("status code %d (%s) is unknown to the bindings"
                        % (past, extra.decode()))
    for fname, cls in structs.items():
        f = getattr(lib, fname)
        f.restype, f.argtypes = c_size_t, []
        if f() != ctypes.sizeof(cls):
            problems.append("%s is %d bytes in the library, %d in the bindings"
                            % (cls.__name__, f(), ctypes.sizeof(cls)))
    if problems:
        raise ImportError("%s (libmess %s) does not match these Python bindings: %s"
                          % (path, _version_text(got), "; ".join(problems)))
    return found

library_limits = check_library(lib, path)
version_number = lib.mess_version_number()

_strerror = lib.mess_strerror
_strerror.restype = c_char_p
_strerror.argtypes = [c_int]


def strerror(code):
    """mess_strerror(code) as a str."""
    return _strerror(int(code)).decode()


def error(code, function=None):
    cls = _ERROR_CLASSES.get(code, MessError)
    return cls(code, strerror(code), function)


def _checked(result, func, args):
    if result != 0:
        e = error(result, func.__name__)
        if isinstance(e, OSError):
            # MESS_EIO and MESS_EEXIST keep the system's errno: name the
            # path and the reason
            err = ctypes.get_errno()
            name = next((a for a in args if isinstance(a, bytes)), None)
            if err:
                e.errno, e.strerror = err, os.strerror(err)
                e.filename = os.fsdecode(name) if name is not None else None
                e.args = ("%s: %s: %s" % (func.__name__, e.filename, e.strerror),)
        raise e
    return result


P_u8 = POINTER(c_uint8)
P_u8p = POINTER(P_u8)
P_size = POINTER(c_size_t)
P_params = POINTER(mess_params)


def _missing(name):
    def call(*args):
        raise NotImplementedError("%s: not exported by %s (an older libmess?)" % (name, path))
    call.__name__ = name
    return call


def _proto(name, argtypes, restype=c_int, check=None):
    if not hasattr(lib, name):
        return _missing(name)
    f = getattr(lib, name)
    f.argtypes = argtypes
    f.restype = restype
    if check is None:
        check = restype is c_int
    if check:
        f.errcheck = _checked
    return f


_P = c_void_p  # opaque handles
_F = c_void_p  # float arrays (numpy .ctypes.data)

version = _proto("mess_version", [], c_char_p)
fvecs_read = _proto("mess_fvecs_read", [c_char_p, POINTER(c_void_p), P_size, P_size])
vecs_read_f32 = _proto("mess_vecs_read_f32", [c_char_p, POINTER(c_void_p), P_size, P_size])
bvecs_read = _proto("mess_bvecs_read", [c_char_p, POINTER(c_void_p), P_size, P_size])
ivecs_read = _proto("mess_ivecs_read", [c_char_p, POINTER(c_void_p), P_size, P_size])
fvecs_write = _proto("mess_fvecs_write", [c_char_p, c_void_p, c_size_t, c_size_t])
bvecs_write = _proto("mess_bvecs_write", [c_char_p, c_void_p, c_size_t, c_size_t])
ivecs_write = _proto("mess_ivecs_write", [c_char_p, c_void_p, c_size_t, c_size_t])
u64vecs_read = _proto("mess_u64vecs_read", [c_char_p, POINTER(c_void_p), P_size, P_size])
u64vecs_write = _proto("mess_u64vecs_write", [c_char_p, c_void_p, c_size_t, c_size_t])
vecs_free = _proto("mess_vecs_free", [c_void_p], None)

params_default = _proto("mess_params_default_sized", [P_params, c_size_t, c_uint32])
params_default_for = _proto("mess_params_default_for_sized",
                            [P_params, c_size_t, c_uint32, c_uint32])
params_check = _proto("mess_params_check", [P_params])
effective_flip = _proto("mess_effective_flip", [c_double, c_double], c_double)
split_flip = _proto("mess_split_flip", [c_double], c_double)

client_new = _proto("mess_client_new", [P_params, c_void_p, c_size_t, c_void_p,
                                        c_uint, POINTER(c_void_p)])
client_free = _proto("mess_client_free", [c_void_p], None)
client_params = _proto("mess_client_params_sized", [c_void_p, P_params, c_size_t])
client_is_deterministic = _proto("mess_client_is_deterministic", [c_void_p], check=False)
client_codes = _proto("mess_client_codes", [c_void_p, c_void_p, c_void_p])
server_new = _proto("mess_server_new", [P_params, POINTER(c_void_p)])
server_free = _proto("mess_server_free", [c_void_p], None)
server_params = _proto("mess_server_params_sized", [c_void_p, P_params, c_size_t])
server_set_ef_search = _proto("mess_server_set_ef_search", [c_void_p, c_uint32])
server_set_layout = _proto("mess_server_set_layout", [c_void_p, c_int])
client_owner = _proto("mess_client_owner", [c_void_p, c_void_p])
server_owner = _proto("mess_server_owner", [c_void_p, c_void_p], check=False)
server_check_owner = _proto("mess_server_check_owner", [c_void_p, c_void_p], check=False)

client_upload = _proto("mess_client_upload", [c_void_p, c_void_p, c_void_p, c_size_t,
                                              c_uint, POINTER(c_void_p), P_size])
server_apply_upload = _proto("mess_server_apply_upload", [c_void_p, c_void_p, c_size_t, c_uint])
server_count_stored = _proto("mess_server_count_stored",
                             [c_void_p, c_void_p, c_size_t, P_size, P_size])
client_delete = _proto("mess_client_delete", [c_void_p, c_void_p, c_size_t,
                                              POINTER(c_void_p), P_size])
server_apply_delete = _proto("mess_server_apply_delete", [c_void_p, c_void_p, c_size_t, P_size])
server_compact = _proto("mess_server_compact", [c_void_p, c_uint])

upload_size = _proto("mess_upload_size", [P_params, c_size_t], c_size_t)
delete_size = _proto("mess_delete_size", [P_params, c_size_t], c_size_t)
request_size = _proto("mess_request_size", [P_params], c_size_t)
response_size = _proto("mess_response_size", [P_params, c_size_t], c_size_t)
payload_size = _proto("mess_payload_size", [P_params], c_size_t)
buf_free = _proto("mess_buf_free", [c_void_p], None)

client_request = _proto("mess_client_request", [c_void_p, c_void_p, c_size_t,
                                                POINTER(c_void_p), POINTER(c_void_p), P_size])
server_search = _proto("mess_server_search", [c_void_p, c_void_p, c_size_t, c_uint,
                                              POINTER(c_void_p), P_size])
client_finish = _proto("mess_client_finish_sized", [c_void_p, c_void_p, c_void_p, c_size_t,
                                                    c_size_t, c_void_p, c_void_p, P_size,
                                                    POINTER(mess_finish_stats), c_size_t])
query_free = _proto("mess_query_free", [c_void_p], None)
# pending queries outside the process (mess.h, "Query state")
query_seal = _proto("mess_query_seal", [c_void_p, c_void_p, c_size_t, POINTER(c_void_p), P_size])
query_unseal = _proto("mess_query_unseal", [c_void_p, c_void_p, c_size_t, c_void_p, c_size_t,
                                            P_size])
query_save = _proto("mess_query_save", [c_void_p, c_void_p, c_size_t, c_char_p])
query_load = _proto("mess_query_load", [c_void_p, c_char_p, c_void_p, c_size_t, P_size])
query_sealed_size = _proto("mess_query_sealed_size", [P_params, c_size_t], c_size_t)
# persistent workers and the batch calls (mess.h, "Batches")
workers_new = _proto("mess_workers_new", [c_uint, POINTER(c_void_p)])
workers_free = _proto("mess_workers_free", [c_void_p], None)
workers_threads = _proto("mess_workers_threads", [c_void_p], c_uint)
server_search_batch = _proto("mess_server_search_batch", [c_void_p, c_void_p, c_void_p, c_size_t,
                                                          c_void_p, c_void_p, c_void_p, c_void_p])
# shard groups (mess.h, "Shard groups")
records_split = _proto("mess_records_split", [P_params, c_void_p, c_size_t, c_void_p,
                                              c_size_t, POINTER(c_void_p), P_size])
server_search_shards = _proto("mess_server_search_shards", [c_void_p, c_void_p, c_size_t,
                                                            c_void_p, c_size_t, c_uint,
                                                            POINTER(c_void_p), P_size])
response_merge = _proto("mess_response_merge", [P_params, c_void_p, c_size_t, c_void_p,
                                                c_void_p, c_size_t, POINTER(c_void_p), P_size,
                                                c_char_p, c_size_t], check=False)
client_set_threads = _proto("mess_client_set_threads", [c_void_p, c_uint])
client_set_verify_all = _proto("mess_client_set_verify_all", [c_void_p, c_int])

client_save = _proto("mess_client_save", [c_void_p, c_char_p, c_char_p])
client_load = _proto("mess_client_load", [c_char_p, c_char_p, POINTER(c_void_p)])
# passphrases as (pointer, length): any bytes, NUL included
client_save_pass = _proto("mess_client_save_pass", [c_void_p, c_char_p, c_char_p, c_size_t])
client_save_new = _proto("mess_client_save_new", [c_void_p, c_char_p, c_char_p, c_size_t])
client_note_applied = _proto("mess_client_note_applied", [c_void_p, c_uint64, c_uint64])
client_applied = _proto("mess_client_applied", [c_void_p, POINTER(c_uint64), POINTER(c_uint64)],
                        check=False)
client_load_pass = _proto("mess_client_load_pass", [c_char_p, c_char_p, c_size_t,
                                                    POINTER(c_void_p)])
server_save = _proto("mess_server_save", [c_void_p, c_char_p])
server_load = _proto("mess_server_load", [c_char_p, P_params, POINTER(c_void_p)])
# server directories (mess.h, "Server directories")
server_create = _proto("mess_server_create", [c_char_p, P_params, POINTER(c_void_p)])
server_open = _proto("mess_server_open", [c_char_p, P_params, c_void_p, c_size_t,
                                          POINTER(c_void_p)])
server_checkpoint = _proto("mess_server_checkpoint", [c_void_p])
server_verify = _proto("mess_server_verify", [c_char_p, c_char_p, c_size_t], check=False)
server_export = _proto("mess_server_export", [c_void_p, c_char_p])
server_import = _proto("mess_server_import", [c_char_p, c_char_p])
server_extract = _proto("mess_server_extract", [c_char_p, c_void_p, c_size_t, c_char_p,
                                                c_char_p, c_size_t], check=False)
server_error = _proto("mess_server_error", [c_void_p, c_char_p, c_size_t], check=False)
server_log_position = _proto("mess_server_log_position", [c_void_p, POINTER(ctypes.c_uint64),
                                                          POINTER(ctypes.c_uint64)])
server_stats_get = _proto("mess_server_stats_get_sized", [c_void_p, POINTER(mess_server_stats),
                                                          c_size_t])

shard_nodes = _proto("mess_server_shard_nodes", [c_void_p, c_uint32, P_size])
shard_entry_point = _proto("mess_server_shard_entry_point", [c_void_p, c_uint32,
                                                             POINTER(c_uint32)])
shard_codes = _proto("mess_server_shard_codes", [c_void_p, c_uint32, c_void_p, c_size_t])
shard_labels = _proto("mess_server_shard_labels", [c_void_p, c_uint32, c_void_p, c_size_t])
shard_levels = _proto("mess_server_shard_levels", [c_void_p, c_uint32, c_void_p, c_size_t])
shard_deleted = _proto("mess_server_shard_deleted", [c_void_p, c_uint32, c_void_p, c_size_t])
shard_entries = _proto("mess_server_shard_entries", [c_void_p, c_uint32, c_void_p, c_size_t])
shard_neighbors = _proto("mess_server_shard_neighbors", [c_void_p, c_uint32, c_uint32,
                                                         c_uint32, c_void_p, c_size_t, P_size])
shard_links = _proto("mess_server_shard_links", [c_void_p, c_uint32, c_uint32, c_void_p,
                                                 c_size_t, c_void_p, c_size_t, P_size])


def has(name):
    """True if the loaded library exports the symbol (newer APIs)."""
    return hasattr(lib, name)
