#include "tests/testdata.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace waste::testing {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

[[noreturn]] void Missing(const std::string& path) {
  fprintf(stderr,
          "test fixture not found: %s\n"
          "Set WASTE_TEST_MODELS to the absolute path of the shared models directory "
          "(the README's test command does this).\n",
          path.c_str());
  abort();
}

}  // namespace

std::string ModelsDir() {
  const char* env = getenv("WASTE_TEST_MODELS");
  std::string dir = env != nullptr && env[0] != '\0' ? env : "../shared/models";
  if (!Exists(dir)) Missing(dir);
  return dir;
}

std::string ModelPath(const std::string& relative) {
  std::string path = ModelsDir() + "/" + relative;
  if (!Exists(path)) Missing(path);
  return path;
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<int32_t> StoriesGoldenIds() {
  // Comma-separated ids after '#' comment lines.
  std::istringstream in(ReadTextFile(ModelPath("stories260K/golden/greedy_from_bos_256.ids")));
  std::string line;
  std::vector<int32_t> ids;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string field;
    while (std::getline(fields, field, ',')) {
      if (field.find_first_not_of(" \t\r") != std::string::npos) ids.push_back(std::stoi(field));
    }
  }
  return ids;
}

std::string StoriesGoldenText() {
  return ReadTextFile(ModelPath("stories260K/golden/greedy_from_bos_256.txt"));
}

std::string TempDir() {
  static std::atomic<int> counter{0};
  const char* base = getenv("TEST_TMPDIR");
  std::string root = base != nullptr && base[0] != '\0' ? base : "/tmp";
  std::string dir =
      root + "/waste-" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1));
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::string SocketDir() {
  char templ[] = "/tmp/waste-sock-XXXXXX";
  if (mkdtemp(templ) == nullptr) {
    perror("mkdtemp");
    abort();
  }
  return templ;
}

}  // namespace waste::testing
