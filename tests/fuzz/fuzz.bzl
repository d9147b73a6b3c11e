"""strata_fuzz_target: a libFuzzer target and the test that replays its corpus.

A target is a file defining LLVMFuzzerTestOneInput. Built normally (gcc, the
suite), `<name>` links replay_main.cc, which runs every file of the
directories and files it is given through the target once, and
`<name>_corpus_test` replays the committed corpus `corpus/<name>/` (seeds
and every crash found so far): a regression test in the suite. Built with
--config=fuzz (clang, tools/fuzz.sh), `<name>` is a libFuzzer binary under
AddressSanitizer and UndefinedBehaviorSanitizer.
"""

def strata_fuzz_target(name, srcs, deps = [], data = []):
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        data = data,
        deps = deps + select({
            ":fuzzing": [],
            "//conditions:default": [":replay_main"],
        }),
        linkopts = select({
            ":fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
    )
    native.sh_test(
        name = name + "_corpus_test",
        size = "small",
        srcs = ["replay_corpus_test.sh"],
        args = ["$(location :%s)" % name, "tests/fuzz/corpus/%s" % name],
        data = [":" + name] + native.glob(["corpus/%s/**" % name]),
    )
