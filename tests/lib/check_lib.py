"""The pass/fail bookkeeping the test scripts share: each check prints one line and the failures
are counted; the script ends with their number (exit 1) or its PASS line.

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    from check_lib import check, finish
    check(dry == real, "rank 0: the dry run's bytes are the real rank's")
    finish("PASS: ...")                     # or: 2 check(s) failed (exit 1)
"""
import sys

failures = []


def check(cond, what):
    """Prints `ok:   what` or `FAIL: what` and remembers a failure; returns cond."""
    print(("ok:   " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def finish(passed, note=""):
    """Exits 1 naming how many checks failed (and `note`, e.g. where a log is), else prints `passed`."""
    if failures:
        print(f"{len(failures)} check(s) failed{note}")
        sys.exit(1)
    print(passed)
