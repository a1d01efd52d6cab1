# tap.py - TAP for the Python tests (tests/lib/tap.c and tap.sh are the C
# and shell side): ok() counts and prints a check, diag() a comment,
# done() the plan line, and gives the exit status.
#
#   from tap import diag, done, ok
#   ok(cond, "what"); ...; sys.exit(done())


class _Tap:
    n = 0
    failed = 0


def ok(cond, what):
    _Tap.n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", _Tap.n, what), flush=True)
    if not cond:
        _Tap.failed += 1
    return cond


def diag(text):
    for line in str(text).splitlines():
        print("# " + line, flush=True)


def done():
    """The plan line; the exit status."""
    print("1..%d" % _Tap.n)
    return 1 if _Tap.failed else 0
