"""tests/payload_kat.h is what scripts/payload_kat.py computes now (the
independent libsodium computation of the payload known-answer vectors that
tests/test_payload_kat.c checks payload.c against)."""
import os
import subprocess
import sys
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


class TestPayloadKat(unittest.TestCase):
    def test_checked_in_vectors_are_reproduced(self):
        got = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "payload_kat.py")],
                             check=True, stdout=subprocess.PIPE).stdout
        with open(os.path.join(ROOT, "tests", "payload_kat.h"), "rb") as f:
            self.assertEqual(got, f.read())


if __name__ == "__main__":
    unittest.main()
