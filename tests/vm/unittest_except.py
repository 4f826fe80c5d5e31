"""Runs a unittest module's tests (verbose) except those named: unittest_except.py MODULE NAME...
(NAME: a test method's name). Exit status 0 when every test run passed."""
import sys
import unittest


def tests(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from tests(t)
        else:
            yield t


module, skip = sys.argv[1], set(sys.argv[2:])
sys.path.insert(0, ".")
chosen = unittest.TestSuite(t for t in tests(unittest.defaultTestLoader.loadTestsFromName(module))
                            if t.id().rsplit(".", 1)[-1] not in skip)
sys.exit(0 if unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(chosen).wasSuccessful() else 1)
