"""waste_fuzz_target: a libFuzzer entry point and its gcc seed-replay test."""

def waste_fuzz_target(name, deps, size = "small", data = []):
    """Declares NAME_fuzzer (the entry point in NAME_fuzzer.cc, linked whole)
    and NAME_fuzzer_test, which replays corpus/NAME/ (seed_replay_test.cc).

    tests/fuzz/run_fuzzer.sh NAME SECONDS builds the same entry point with
    clang, libFuzzer, ASan and UBSan, from the sources `bazel query` lists
    for NAME_fuzzer, and fuzzes from corpus/NAME/.
    """
    native.cc_library(
        name = name + "_fuzzer",
        testonly = True,
        srcs = [name + "_fuzzer.cc"],
        deps = deps,
        alwayslink = True,
    )
    native.cc_test(
        name = name + "_fuzzer_test",
        size = size,
        srcs = ["seed_replay_test.cc"],
        local_defines = ["FUZZ_CORPUS=\\\"tests/fuzz/corpus/%s\\\"" % name],
        data = native.glob(["corpus/%s/*" % name]) + data,
        deps = [
            ":" + name + "_fuzzer",
            "@system//:gtest_main",
        ],
    )
