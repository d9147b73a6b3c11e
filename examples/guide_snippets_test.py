#!/usr/bin/env python3
"""Every ```cpp block of docs/guide.md appears, line for line, in a file of
examples/ or in tests/examples_test.cc (which builds and runs them): the
guide shows code that compiles and works, and fails here when the code
moves on."""
import os
import sys


def blocks(text):
    out, cur, inside = [], [], False
    for line in text.splitlines():
        if line.startswith("```cpp"):
            inside, cur = True, []
        elif line.startswith("```") and inside:
            inside = False
            out.append("\n".join(cur))
        elif inside:
            cur.append(line)
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    with open(os.path.join(root, "docs", "guide.md")) as f:
        guide = f.read()
    sources = {}
    ex = os.path.join(root, "examples")
    paths = [os.path.join(ex, n) for n in sorted(os.listdir(ex)) if n.endswith(".cc")]
    paths.append(os.path.join(root, "tests", "examples_test.cc"))
    for path in paths:
        with open(path) as f:
            sources[path] = f.read()
    found = blocks(guide)
    if not found:
        print("guide_snippets_test: docs/guide.md has no cpp blocks")
        return 1
    failures = 0
    for i, b in enumerate(found, 1):
        if not any(b in s for s in sources.values()):
            failures += 1
            first = b.splitlines()[0] if b else ""
            print(f"guide_snippets_test: block {i} (starting {first!r}) is in no examples/*.cc file nor tests/examples_test.cc")
    print(f"guide_snippets_test: {len(found) - failures} of {len(found)} blocks found in examples/")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
