"""A minimal stand-in for the `expecttest` package, which
torch.testing._internal.common_utils imports and Debian does not package.

Only dist_suite.py puts this folder on sys.path. It provides what
common_utils uses at import time (ACCEPT, TestCase) and an
assertExpectedInline that compares and never rewrites the caller's source
(ACCEPT is honoured as False: accepting would edit torch's installed files).
"""
import textwrap
import unittest

ACCEPT = False


def _normalize(s):
    return textwrap.dedent(s).strip("\n")


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertIsInstance(actual, str)
        self.assertMultiLineEqual(_normalize(expect), actual.strip("\n"))

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        try:
            callable(*args, **kwargs)
        except exc_type as e:
            self.assertExpectedInline(str(e), expect, skip=1)
            return
        self.fail(f"did not raise when expected {exc_type.__name__}")
