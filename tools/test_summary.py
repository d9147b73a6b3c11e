#!/usr/bin/env python3
"""Counts test cases across every Bazel test target and prints "N passed, M failed".

Reads bazel-testlogs/<target>/test.xml (gtest's JUnit output). A test target
with no XML (it failed to build, or crashed before writing one) counts as one
failure, named on stderr. --junit=FILE adds the cases of a check run outside
Bazel (tools/layering_check.sh). Exit status 1 if anything failed.

CUDA-only test targets (target_compatible_with = cuda_only(): skipped by the
default configuration) are counted only with --with_cuda, i.e. when
tools/test.sh has run them under --config=cuda; otherwise they are left out
and said so on stderr. --bazel_log may be given once per Bazel run.
"""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET


def bad_targets(log_path):
    """Targets Bazel reported as not passing (failed to build, no status, timeout)."""
    bad = set()
    if not log_path or not os.path.exists(log_path):
        return bad
    with open(log_path, errors="replace") as f:
        for line in f:
            # A target that failed analysis (a visibility error, say) never
            # runs, and its report in bazel-testlogs may be an old run's.
            marker = "errors encountered while analyzing target '"
            if marker in line:
                bad.add(line.split(marker, 1)[1].split("'", 1)[0])
                continue
            words = line.split()
            if words and words[0].startswith("//") and any(
                    w in ("FAILED", "NO", "TIMEOUT", "INCOMPLETE", "FLAKY") for w in words[1:]):
                bad.add(words[0])
    return bad


CUDA_ONLY_QUERY = ('attr(target_compatible_with, "incompatible", tests(//...)) '
                   'except attr(tags, manual, //...)')


def query(expr):
    return subprocess.run(["bazel", "query", expr],
                          capture_output=True, text=True, check=True).stdout.split()


def main():
    bad = set()
    for a in sys.argv[1:]:
        if a.startswith("--bazel_log="):
            bad |= bad_targets(a.split("=", 1)[1])
    with_cuda = "--with_cuda" in sys.argv[1:]
    extra = [a for a in sys.argv[1:] if a.startswith("--config")]
    targets = query("tests(//...) except attr(tags, manual, //...)")
    if not with_cuda:
        cuda_only = set(query(CUDA_ONLY_QUERY))
        if cuda_only:
            print(f"not counted: {len(cuda_only)} CUDA-only test targets "
                  "(run by tools/test.sh where /usr/local/cuda exists)", file=sys.stderr)
        targets = [t for t in targets if t not in cuda_only]
    logs = subprocess.run(["bazel", "info"] + extra + ["bazel-testlogs"],
                          capture_output=True, text=True, check=True).stdout.strip()
    passed = failed = 0
    for t in targets:
        path = os.path.join(logs, t.lstrip("/").replace(":", "/"), "test.xml")
        status_ok = os.path.exists(path)
        if not status_ok:
            print(f"no test report: {t}", file=sys.stderr)
            failed += 1
            continue
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError:
            print(f"unreadable test report: {t}", file=sys.stderr)
            failed += 1
            continue
        cases = root.iter("testcase")
        n = 0
        failed_before = failed
        for case in cases:
            n += 1
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                print(f"FAILED: {t} {case.get('classname')}.{case.get('name')}", file=sys.stderr)
            else:
                passed += 1
        if n == 0:
            # A non-gtest test (sh_test): the suite-level attributes carry the verdict.
            errs = int(root.get("errors", "0") or 0) + int(root.get("failures", "0") or 0)
            for suite in root.iter("testsuite"):
                errs += int(suite.get("errors", "0") or 0) + int(suite.get("failures", "0") or 0)
            if errs:
                failed += 1
                print(f"FAILED: {t}", file=sys.stderr)
            else:
                passed += 1
        if t in bad and failed == failed_before:
            # Bazel says it did not pass but the report (maybe stale) shows no failure.
            print(f"FAILED (per bazel): {t}", file=sys.stderr)
            failed += 1
    # Checks that run outside Bazel (tools/layering_check.sh) leave JUnit XML.
    for a in sys.argv[1:]:
        if not a.startswith("--junit="):
            continue
        path = a.split("=", 1)[1]
        try:
            cases = list(ET.parse(path).getroot().iter("testcase"))
        except (OSError, ET.ParseError):
            print(f"no report from a check outside Bazel: {path}", file=sys.stderr)
            failed += 1
            continue
        for case in cases:
            if case.find("failure") is not None:
                failed += 1
                print(f"FAILED: {case.get('classname')}.{case.get('name')}", file=sys.stderr)
            else:
                passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
