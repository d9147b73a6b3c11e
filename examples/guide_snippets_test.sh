#!/usr/bin/env bash
# docs/guide.md's code blocks are cut from examples/*.cc (see the .py).
exec python3 examples/guide_snippets_test.py .
