"""TEXMEX vector files (.fvecs / .bvecs / .ivecs) and .u64vecs (uint64
ids of any size) through libmess's
checked readers.  Arrays come back as numpy arrays over the library's own
allocation (no copy), freed with mess_vecs_free when the array goes away."""
import os
from ctypes import byref, c_size_t, c_void_p

import numpy as np

from . import _lib as L


class _Owned:
    """Keeps a malloc'd block alive as a numpy array's base."""

    def __init__(self, ptr, shape, typestr):
        self._ptr = ptr
        self.__array_interface__ = {"shape": shape, "typestr": typestr,
                                    "data": (ptr, False), "version": 3}

    def __del__(self):
        p, self._ptr = self._ptr, None
        if p:
            L.vecs_free(p)


def _read(fn, path, typestr, dtype):
    ptr, n, d = c_void_p(), c_size_t(), c_size_t()
    fn(os.fsencode(path), byref(ptr), byref(n), byref(d))
    if not ptr.value:  # an empty file: nothing allocated
        return np.empty((n.value, d.value), dtype=dtype)
    return np.asarray(_Owned(ptr.value, (n.value, d.value), typestr))


def read_f32(path):
    """.fvecs or .bvecs (by extension) as float32 (n, dim)."""
    return _read(L.vecs_read_f32, path, "<f4", np.float32)


def read_fvecs(path):
    """float32 (n, dim) from an .fvecs file whatever its name."""
    return _read(L.fvecs_read, path, "<f4", np.float32)


def read_bvecs(path):
    """uint8 (n, dim)."""
    return _read(L.bvecs_read, path, "|u1", np.uint8)


def read_ivecs(path):
    """int32 (n, dim), e.g. ground truth."""
    return _read(L.ivecs_read, path, "<i4", np.int32)


def read_u64vecs(path):
    """uint64 (n, dim): ids of any size (mess query --out F.u64vecs)."""
    return _read(L.u64vecs_read, path, "<u8", np.uint64)


def _write(fn, path, a, dtype):
    a = np.asarray(a)
    if a.dtype.kind in "iub" and a.size and np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = a.min(), a.max()
        if int(lo) < info.min or int(hi) > info.max:
            raise ValueError("values in [%d, %d] do not fit %s (range [%d, %d])%s"
                             % (int(lo), int(hi), np.dtype(dtype).name, info.min,
                                info.max, "; write_u64vecs holds uint64 ids"
                                if dtype == np.int32 else ""))
    elif np.dtype(dtype).kind in "iu" and a.dtype.kind not in "iub":
        raise TypeError("need an integer array for %s, got %s" % (np.dtype(dtype).name, a.dtype))
    a = np.ascontiguousarray(a, dtype=dtype)
    if a.ndim != 2:
        raise ValueError("need a 2-d array, got shape %s" % (a.shape,))
    fn(os.fsencode(path), a.ctypes.data, a.shape[0], a.shape[1])


def write_fvecs(path, a):
    _write(L.fvecs_write, path, a, np.float32)


def write_bvecs(path, a):
    _write(L.bvecs_write, path, a, np.uint8)


def write_ivecs(path, a):
    """int32 ids; ValueError for values outside int32 (never wrapped)."""
    _write(L.ivecs_write, path, a, np.int32)


def write_u64vecs(path, a):
    """uint64 ids of any size; ValueError for negative values."""
    _write(L.u64vecs_write, path, a, np.uint64)
