"""Test driver for `make check`: Check unit suites and the fuzz harnesses built without libFuzzer
(binaries given as arguments; those named fuzz_* are harnesses), then the Python integration,
security, SDK and fault-injection suites (unittest), with one summary line at the end."""
import os
import shutil
import tempfile
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, HERE)

CHECK_LINE = re.compile(r"(\d+)%: Checks: (\d+), Failures: (\d+), Errors: (\d+)")


def run_unit(binaries):
    passed = failed = 0
    for b in binaries:
        r = subprocess.run([b], capture_output=True, text=True, env=dict(os.environ, CK_FORK="yes"))
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        m = CHECK_LINE.search(r.stdout)
        if not m:
            print("%s: no Check summary (exit %d)" % (b, r.returncode))
            failed += 1
            continue
        checks, fails, errors = int(m.group(2)), int(m.group(3)), int(m.group(4))
        passed += checks - fails - errors
        failed += fails + errors
        if r.returncode != 0 and fails + errors == 0:
            failed += 1
    return passed, failed


def run_fuzz(binaries):
    """The fuzz harnesses built with tests/fuzz/driver.c (no libFuzzer): each runs once over
    its committed inputs, tests/fuzz/seeds/NAME/ and tests/fuzz/regressions/NAME/; an abort
    (a failed invariant), a sanitizer report, a hang or missing seeds fail it by name."""
    passed = failed = 0
    fuzz = os.path.relpath(os.path.join(TESTS, "fuzz"))
    for b in binaries:
        name = os.path.basename(b)[len("fuzz_"):]
        seeds = os.path.join(fuzz, "seeds", name)
        if not os.path.isdir(seeds) or not os.listdir(seeds):
            print("fuzz_%s: FAILED: no seeds in %s (a harness run on nothing proves nothing)" % (name, seeds))
            failed += 1
            continue
        dirs = [seeds]
        regressions = os.path.join(fuzz, "regressions", name)
        if os.path.isdir(regressions):
            dirs.append(regressions)
        env = dict(os.environ)
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        try:
            r = subprocess.run([b] + dirs, capture_output=True, text=True, errors="replace",
                               env=env, timeout=120)
        except subprocess.TimeoutExpired:
            print("fuzz_%s: FAILED: still running after 120 s (the last input it started is a hang)" % name)
            failed += 1
            continue
        if r.returncode == 0:
            sys.stdout.write(r.stdout)
            passed += 1
            continue
        # The last "input:" line names the file; the sanitizer or invariant report follows it.
        lines = r.stderr.splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith("input: ")]
        tail = lines[starts[-1]:] if starts else lines[-40:]
        sys.stdout.write("".join("    %s\n" % line for line in tail[:60]))
        how = "signal %d" % -r.returncode if r.returncode < 0 else "exit %d" % r.returncode
        print("fuzz_%s: FAILED (%s)%s; reproduce: %s %s" % (
            name, how, " on " + tail[0][len("input: "):] if starts else "", b, " ".join(dirs)))
        failed += 1
    return passed, failed


def run_python(dirs):
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for d in dirs:
        path = os.path.join(TESTS, d)
        if os.path.isdir(path):
            suite.addTests(loader.discover(path, pattern="test_*.py", top_level_dir=path))
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    return result.testsRun - failed - skipped, failed, skipped


def main():
    # `ipybox mcp` uses a daemon it finds under XDG_RUNTIME_DIR: tests get an empty one of their
    # own, so that a developer's running ipyboxd never answers for the embedded supervisor.
    runtime = tempfile.mkdtemp(prefix="ipybox-test-runtime-")
    os.environ["XDG_RUNTIME_DIR"] = runtime
    try:
        return run(sys.argv[1:])
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def run(args):
    unit_only = "--unit-only" in args
    binaries = [a for a in args if not a.startswith("--")]
    harnesses = [b for b in binaries if os.path.basename(b).startswith("fuzz_")]
    print("== unit (Check)")
    up, uf = run_unit([b for b in binaries if b not in harnesses])
    if harnesses:
        print("== fuzz harnesses over their seeds and regressions (tests/fuzz/driver.c)")
        fp, ff = run_fuzz(harnesses)
        up, uf = up + fp, uf + ff
    pp = pf = ps = 0
    if not unit_only:
        only = os.environ.get("TESTS")  # e.g. TESTS=integration
        dirs = [only] if only else ["integration", "security", "sdk", "faults"]
        print("== " + ", ".join(dirs))
        sys.stdout.flush()
        pp, pf, ps = run_python(dirs)
    passed, failed = up + pp, uf + pf
    print("unit: %d passed, %d failed; integration/security/sdk/faults: %d passed, %d failed, %d skipped" % (up, uf, pp, pf, ps))
    print("%d passed, %d failed, %d skipped" % (passed, failed, ps))
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
