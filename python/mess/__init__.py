"""libmess for Python: private nearest-neighbour search (MESS) over ctypes.

    import mess
    p = mess.Params(128, shards=64, per_item=16)
    with mess.Client(p, train, seed=bytes(32)) as c, mess.Server(p) as s:
        c.insert(s, ids, base)
        r = c.query(s, q, k=10, pool=1500)   # request -> search -> finish
        r.ids, r.dists, r.request_bytes, r.response_bytes

The library is found through $MESS_LIBRARY, next to this package or in the
source tree's build/, or on the system (see mess._lib).  Errors raise
mess.MessError subclasses carrying the library's message.
"""
from . import _lib
from . import account  # noqa: F401  (mess.account: accountants, planning)
from ._lib import (AlreadyExistsError, AuthenticationError, BusyError, CryptoInitError,
                   FormatError,
                   InvalidArgumentError, IOFailureError, LimitError,
                   MessError, NotFoundError, NumericError, OutOfMemoryError,
                   OwnerError, ParamsMismatchError, PassphraseError, RoleError,
                   StateError, VersionError, strerror)
from .choose import Choice, NoConfigurationError, choose  # noqa: F401  (mess_plan_choose)
from .core import (METRICS, OWNER_BYTES, PAYLOADS, Buffer, Client, FinishStats, MessWarning,
                   Params, Query, QueryResult, Server, ServerStats, ShardView, Workers,
                   effective_flip, merge_responses, split_flip, split_records)
from .vecs import (read_bvecs, read_f32, read_fvecs, read_ivecs, read_u64vecs,
                   write_bvecs, write_fvecs, write_ivecs, write_u64vecs)

library_path = _lib.path
__version__ = _lib.version().decode()

# the loaded library's limits (checked against the bindings' at import)
MAX_DIM = _lib.library_limits["MAX_DIM"]
MAX_SHARDS = _lib.library_limits["MAX_SHARDS"]
MAX_BITS = _lib.library_limits["MAX_BITS"]
MAX_BUDGET = _lib.library_limits["MAX_BUDGET"]
MAX_HNSW_M = _lib.library_limits["MAX_HNSW_M"]
MAX_EF = _lib.library_limits["MAX_EF"]
SEED_BYTES = _lib.library_limits["SEED_BYTES"]
VERSION_NUMBER = _lib.version_number  # the loaded library's MESS_VERSION_NUMBER


def version():
    """The linked library's version string."""
    return _lib.version().decode()
