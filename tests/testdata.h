// Where tests find the shared model fixtures (../shared/models): the
// WASTE_TEST_MODELS environment variable, else ../shared/models relative to
// the working directory. Bazel tests get an absolute path through
// --test_env (see .bazelrc and the README's test command).
#ifndef WASTE_TESTS_TESTDATA_H_
#define WASTE_TESTS_TESTDATA_H_

#include <string>

namespace waste::testing {

// The fixtures directory. Aborts the test with a message saying how to set
// WASTE_TEST_MODELS when the directory does not exist.
std::string ModelsDir();

// ModelsDir() + "/" + relative, checked to exist in the same way.
std::string ModelPath(const std::string& relative);

// A fresh directory for this test's scratch files (under TEST_TMPDIR).
std::string TempDir();

// A fresh directory with a short path under /tmp, for Unix sockets (whose
// paths are limited to 107 bytes; Bazel's TEST_TMPDIR is longer).
std::string SocketDir();

}  // namespace waste::testing

#endif  // WASTE_TESTS_TESTDATA_H_
