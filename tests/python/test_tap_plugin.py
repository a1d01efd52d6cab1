"""tap_plugin.py, the bridge from pytest to tests/run-tests, keeps its
promises: one TAP line per result pytest counts, the same tallies as
pytest's closing line, a plan, and no silent pass for a run that
collected nothing (pytest's exit 5)."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

# Nothing here depends on the transport, and starting pytest takes seconds
# under TCG: the host's run covers it.
pytestmark = pytest.mark.skipif(os.environ.get("RMEM_TEST_TRANSPORT") == "rdma",
                                reason="transport-independent: run on the host")

SAMPLE = textwrap.dedent("""
    import pytest

    @pytest.fixture
    def bad_teardown():
        yield
        raise RuntimeError("teardown")

    @pytest.fixture
    def bad_setup():
        raise RuntimeError("setup")

    def test_pass(): pass
    def test_fail(): assert False
    def test_teardown_error(bad_teardown): pass
    def test_setup_error(bad_setup): pass
    def test_skip(): pytest.skip("why")
    @pytest.mark.xfail(reason="known")
    def test_xfail(): assert False
    @pytest.mark.xfail(reason="known")
    def test_xpass(): pass
""")


def run_pytest(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    r, w = os.pipe()
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)),
               RMEM_TAP_FD=str(w))
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "tap_plugin", "-p",
                          "no:cacheprovider", "-q", "--rootdir", str(tmp_path), str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         pass_fds=(w,))
    os.close(w)
    with os.fdopen(r) as f:
        tap = f.read().splitlines()
    out = p.communicate(timeout=120)[0]
    return p.returncode, tap, out


def counts(tap):
    """As tests/run-tests counts: ok/not ok, a # SKIP or # TODO is skipped."""
    c = {"pass": 0, "fail": 0, "skip": 0}
    for line in tap:
        if line.startswith("not ok"):
            c["skip" if re.search(r"#\s*TODO", line, re.I) else "fail"] += 1
        elif line.startswith("ok"):
            c["skip" if re.search(r"#\s*(SKIP|TODO)", line, re.I) else "pass"] += 1
    return c


def test_tallies_agree_with_pytest(tmp_path):
    rc, tap, out = run_pytest(tmp_path, {"test_sample.py": SAMPLE})
    assert rc == 1
    closing = out.strip().splitlines()[-1]
    got = dict((k, int(n)) for n, k in re.findall(r"(\d+) (\w+)", closing))
    c = counts(tap)
    assert c["pass"] == got.get("passed", 0) == 2, (closing, tap)   # test_pass, test_teardown_error's call
    assert c["fail"] == got.get("failed", 0) + got.get("errors", got.get("error", 0)) == 3
    assert c["skip"] == got.get("skipped", 0) + got.get("xfailed", 0) + got.get("xpassed", 0) == 3
    assert tap[-1] == "1..%d" % (len(tap) - 1)


def test_no_tests_is_a_failure(tmp_path):
    rc, tap, out = run_pytest(tmp_path, {"test_empty.py": "# nothing\n"})
    assert rc == 5, out
    assert counts(tap) == {"pass": 0, "fail": 1, "skip": 0}, tap
    assert "no tests" in tap[0] and tap[-1] == "1..1"


def test_collection_error_is_a_failure(tmp_path):
    rc, tap, out = run_pytest(tmp_path, {"test_broken.py": "import no_such_module_here\n"})
    assert rc == 2, out
    assert counts(tap)["fail"] >= 1 and counts(tap)["pass"] == 0, tap
