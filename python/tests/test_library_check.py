"""The import-time check of the loaded library (mess._lib.check_library):
the bindings' expected version, limits, status codes and struct sizes
equal the headers', the real library passes, and each kind of mismatch is
refused with an ImportError that names it (the expected values are made
wrong through check_library's arguments; the library is the real one)."""
import ctypes
import os
import re
import unittest

import mess
from mess import _lib as L

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def header_defines():
    """#define NAME VALUE of mess.h and mess_experimental.h, evaluated."""
    out = {}
    for h in ("mess.h", "mess_experimental.h"):
        with open(os.path.join(ROOT, h)) as f:
            text = f.read().replace("\\\n", " ")
        for name, value in re.findall(r"^#define (MESS_\w+)\s+(.+?)\s*(?:/\*.*)?$", text, re.M):
            out[name] = value
    env = {}
    values = {}
    for name, value in out.items():
        expr = re.sub(r"(\d)u\b", r"\1", value.replace("(uint64_t)", ""))
        try:
            values[name] = eval(expr, {}, env)  # header arithmetic only
        except Exception:
            continue
        env[name] = values[name]
    return values


class TestLibraryCheck(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.h = header_defines()

    def test_bindings_match_headers(self):
        h = self.h
        self.assertEqual(L.VERSION_NUMBER, h["MESS_VERSION_NUMBER"])
        for name, value in L.LIMITS.items():
            self.assertEqual(value, h["MESS_" + name], name)
        # every status code of the header, and nothing else
        codes = {v: k for k, v in h.items() if re.fullmatch(r"MESS_(OK|E[A-Z]+)", k)}
        self.assertEqual(L.CODE_NAMES, {c: n for c, n in codes.items() if c != 0})
        # every limit the header pairs with a function is checked
        text = ""
        for name in ("mess.h", "mess_experimental.h"):
            with open(os.path.join(ROOT, name)) as f:
                text += f.read()
        funcs = set(re.findall(r"MESS_API \w+ mess_(\w+)\(void\)", text))
        limits = {f for f in funcs if "MESS_" + f.upper() in h}
        self.assertEqual(limits - {"version_number"}, {n.lower() for n in L.LIMITS})

    def test_real_library_passes(self):
        found = L.check_library(L.lib, L.path)
        self.assertEqual(found, L.LIMITS)
        self.assertEqual(mess.MAX_SHARDS, self.h["MESS_MAX_SHARDS"])
        self.assertEqual(mess.SEED_BYTES, 32)
        self.assertEqual(mess.VERSION_NUMBER, self.h["MESS_VERSION_NUMBER"])
        # a patch release of the same minor version is accepted
        L.check_library(L.lib, L.path, version_number=L.VERSION_NUMBER + 7)

    def refused(self, **wrong):
        with self.assertRaises(ImportError) as cm:
            L.check_library(L.lib, L.path, **wrong)
        msg = str(cm.exception)
        self.assertIn(L.path, msg)
        return msg

    def test_other_minor_version_refused(self):
        msg = self.refused(version_number=L.VERSION_NUMBER + 100)
        v = L.VERSION_NUMBER
        self.assertIn("is libmess %d.%d.%d" % (v // 10000, v // 100 % 100, v % 100), msg)
        self.assertIn("for libmess %d.%d.x" % (v // 10000, v // 100 % 100 + 1), msg)
        self.assertIn("MESS_LIBRARY", msg)
        self.refused(version_number=L.VERSION_NUMBER + 10000)

    def test_limit_mismatch_refused(self):
        msg = self.refused(limits=dict(L.LIMITS, MAX_SHARDS=2048, SEED_BYTES=16))
        self.assertIn("MESS_MAX_SHARDS is 1024 in the library, 2048 in the bindings", msg)
        self.assertIn("MESS_SEED_BYTES is 32 in the library, 16 in the bindings", msg)

    def test_status_codes_refused(self):
        msg = self.refused(codes={**L.CODE_NAMES, -7: "MESS_EFORGED"})
        self.assertIn("status code -7 is MESS_EAUTH in the library, MESS_EFORGED", msg)
        fewer = {c: n for c, n in L.CODE_NAMES.items() if c != min(L.CODE_NAMES)}
        msg = self.refused(codes=fewer)
        self.assertIn("status code %d (%s) is unknown to the bindings"
                      % (min(L.CODE_NAMES), L.CODE_NAMES[min(L.CODE_NAMES)]), msg)

    def test_struct_size_refused(self):
        class short_params(ctypes.Structure):
            _fields_ = L.mess_params._fields_[:-1]
        msg = self.refused(structs=dict(L.STRUCTS, mess_sizeof_params=short_params))
        self.assertIn("short_params is %d bytes in the library, %d in the bindings"
                      % (ctypes.sizeof(L.mess_params), ctypes.sizeof(short_params)), msg)


if __name__ == "__main__":
    unittest.main()
