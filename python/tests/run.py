"""Runs the binding tests and ends with "N passed, N failed" (the line
tests/run.sh adds up)."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py")
result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
skipped = len(result.skipped)
if skipped:
    print("%d skipped: %s" % (skipped, "; ".join(sorted(set(r for _, r in result.skipped)))))
print("%d passed, %d failed" % (result.testsRun - failed - skipped, failed))
sys.exit(1 if failed else 0)
