"""tap_plugin - pytest's results as TAP for tests/run-tests.

Loaded by tests/python/test_python.sh (-p tap_plugin).  Every report that
pytest counts in its closing line gets one TAP line, decided by pytest's
own pytest_report_teststatus, so the two tallies are the same by
construction:
    passed                  ok N - nodeid
    failed, error           not ok N - nodeid (the phase that failed)
    skipped                 ok N - nodeid # SKIP reason
    xfailed                 ok N - nodeid # TODO reason   (run-tests: skipped)
    xpassed                 ok N - nodeid # TODO xpassed  (run-tests: skipped;
                            a strict xfail that passes is "failed" to pytest)
So run-tests' "P passed, F failed, S skipped" for this program is pytest's
"passed", "failed" + "errors", and "skipped" + "xfailed" + "xpassed".
A collection error is a "not ok" too.  The TAP goes to descriptor 3 (the
wrapper's stdout; RMEM_TAP_FD names another), apart from pytest's own
output, which the wrapper turns into "#" comments so that no line of it
can be counted.  At the end, the plan; a run that collected nothing
(pytest's exit 5) or was interrupted gets a "not ok" of its own, so it
can never pass silently (tests/python/test_tap_plugin.py checks these).
"""
import os

import pytest

class _Tap:
    def __init__(self, config):
        self.config = config
        self.n = 0
        try:
            fd = int(os.environ.get("RMEM_TAP_FD", "3"))
            self.out = os.fdopen(os.dup(fd), "w", buffering=1)
        except OSError:
            self.out = None

    def emit(self, status, text):
        self.n += 1
        text = " ".join(str(text).split())
        line = "%s %d - %s" % (status, self.n, text)
        if self.out:
            self.out.write(line + "\n")
            self.out.flush()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report):
        self.report(report)

    @pytest.hookimpl(trylast=True)
    def pytest_collectreport(self, report):
        if report.failed:
            self.emit("not ok", "%s: collection error" % (report.nodeid or "session"))

    def report(self, rep):
        res = self.config.hook.pytest_report_teststatus(report=rep, config=self.config)
        category = res[0] if isinstance(res, tuple) else res
        if not category:
            return  # a phase pytest does not count (a passing setup...)
        name = rep.nodeid
        if rep.when != "call":
            name += " (%s)" % rep.when
        if category == "passed":
            self.emit("ok", name)
        elif category == "skipped":
            reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else ""
            self.emit("ok", "%s # SKIP %s" % (name, reason or "skipped"))
        elif category == "xfailed":
            self.emit("ok", "%s # TODO %s" % (name, getattr(rep, "wasxfail", "")))
        elif category == "xpassed":
            self.emit("ok", "%s # TODO xpassed" % name)
        else:  # failed, error
            self.emit("not ok", "%s [%s]" % (name, category))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            self.emit("not ok", "pytest collected no tests (exit 5)")
        elif exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR,
                            pytest.ExitCode.USAGE_ERROR):
            self.emit("not ok", "pytest ended with exit status %d" % int(exitstatus))
        if self.out:
            self.out.write("1..%d\n" % self.n)
            self.out.flush()


def pytest_configure(config):
    config.pluginmanager.register(_Tap(config), "rmem_tap")
