// Where tests find the shared model fixtures (../shared/models): the
// WASTE_TEST_MODELS environment variable, else ../shared/models relative to
// the working directory. Bazel tests get an absolute path through
// --test_env (see .bazelrc and the README's test command).
#ifndef WASTE_TESTS_TESTDATA_H_
#define WASTE_TESTS_TESTDATA_H_

#include <cstdint>
#include <string>
#include <vector>

namespace waste::testing {

// The fixtures directory. Aborts the test with a message saying how to set
// WASTE_TEST_MODELS when the directory does not exist.
std::string ModelsDir();

// ModelsDir() + "/" + relative, checked to exist in the same way.
std::string ModelPath(const std::string& relative);

// The whole contents of a file (empty if it cannot be read).
std::string ReadTextFile(const std::string& path);

// stories260K's golden greedy continuation of BOS: the 256 token ids of
// stories260K/golden/greedy_from_bos_256.ids, and its text.
std::vector<int32_t> StoriesGoldenIds();
std::string StoriesGoldenText();

// A fresh directory for this test's scratch files (under TEST_TMPDIR).
std::string TempDir();

// A fresh directory with a short path under /tmp, for Unix sockets (whose
// paths are limited to 107 bytes; Bazel's TEST_TMPDIR is longer).
std::string SocketDir();

}  // namespace waste::testing

#endif  // WASTE_TESTS_TESTDATA_H_
