#include "daemon/engine/model_catalog.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace waste {
namespace {

void WriteFile(const std::string& path, size_t size) {
  std::ofstream out(path);
  out << std::string(size, 'x');
}

TEST(ModelCatalogTest, FindsGgufFilesRecursivelySortedByName) {
  std::string root = testing::TempDir();
  mkdir((root + "/sub").c_str(), 0755);
  WriteFile(root + "/zeta.gguf", 10);
  WriteFile(root + "/sub/alpha.gguf", 20);
  WriteFile(root + "/notes.txt", 5);
  ModelCatalog catalog({root});
  ASSERT_TRUE(catalog.Validate().ok());
  std::vector<ModelFile> models = catalog.Scan();
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].name, "alpha");
  EXPECT_EQ(models[0].size_bytes, 20);
  EXPECT_EQ(models[0].path, root + "/sub/alpha.gguf");
  EXPECT_EQ(models[1].name, "zeta");
}

// gguf-split's parts are one model, named without the part suffix.
TEST(ModelCatalogTest, ASplitModelIsItsFirstPart) {
  std::string root = testing::TempDir() + "/split";
  mkdir(root.c_str(), 0755);
  WriteFile(root + "/DeepSeek-R1-IQ1_S-00001-of-00003.gguf", 10);
  WriteFile(root + "/DeepSeek-R1-IQ1_S-00002-of-00003.gguf", 20);
  WriteFile(root + "/DeepSeek-R1-IQ1_S-00003-of-00003.gguf", 30);
  WriteFile(root + "/plain.gguf", 5);
  ModelCatalog catalog({root});
  std::vector<ModelFile> models = catalog.Scan();
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].name, "DeepSeek-R1-IQ1_S");
  EXPECT_EQ(models[0].path, root + "/DeepSeek-R1-IQ1_S-00001-of-00003.gguf");
  EXPECT_EQ(models[0].size_bytes, 60);
  EXPECT_EQ(models[1].name, "plain");
  auto found = catalog.Find("DeepSeek-R1-IQ1_S");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->path, models[0].path);
}

TEST(ModelCatalogTest, EarlierDirectoryWinsOnSameName) {
  std::string first = testing::TempDir();
  std::string second = testing::TempDir();
  WriteFile(first + "/m.gguf", 1);
  WriteFile(second + "/m.gguf", 2);
  ModelCatalog catalog({first, second});
  std::vector<ModelFile> models = catalog.Scan();
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].size_bytes, 1);
}

TEST(ModelCatalogTest, MissingDirectoryAndUnknownModelAreClearErrors) {
  ModelCatalog catalog({"/nonexistent/models"});
  absl::Status status = catalog.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "models directory /nonexistent/models does not exist");
  auto missing = ModelCatalog({testing::TempDir()}).Find("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(ModelCatalogTest, NamesThatReachOutsideAreRefused) {
  ModelCatalog catalog({testing::TempDir()});
  for (const std::string& name :
       std::vector<std::string>{"../secret", "a/b", "..", ".", "", std::string("m\0x", 3)}) {
    auto found = catalog.Find(name);
    EXPECT_EQ(found.status().code(), absl::StatusCode::kInvalidArgument) << name;
  }
  EXPECT_TRUE(IsValidModelName("Qwen3-30B-A3B-Q4_K_M"));
}

TEST(ModelCatalogTest, SymlinksOutsideTheDirectoryNeedFollowSymlinks) {
  const std::string outside = testing::TempDir();
  const std::string root = testing::TempDir();
  WriteFile(outside + "/secret.gguf", 7);
  mkdir((outside + "/dir").c_str(), 0755);
  WriteFile(outside + "/dir/deep.gguf", 3);
  WriteFile(root + "/real.gguf", 5);
  ASSERT_EQ(symlink((outside + "/secret.gguf").c_str(), (root + "/linked.gguf").c_str()), 0);
  ASSERT_EQ(symlink((outside + "/dir").c_str(), (root + "/linkdir").c_str()), 0);
  // A link that stays inside is fine either way.
  ASSERT_EQ(symlink((root + "/real.gguf").c_str(), (root + "/alias.gguf").c_str()), 0);

  std::vector<std::string> names;
  for (const ModelFile& m : ModelCatalog({root}).Scan()) names.push_back(m.name);
  EXPECT_EQ(names, (std::vector<std::string>{"alias", "real"}));
  EXPECT_EQ(ModelCatalog({root}).Find("linked").status().code(), absl::StatusCode::kNotFound);

  names.clear();
  for (const ModelFile& m : ModelCatalog({root}, /*follow_symlinks=*/true).Scan()) {
    names.push_back(m.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"alias", "deep", "linked", "real"}));
}

TEST(ModelCatalogTest, ListsTheSharedStoriesModel) {
  ModelCatalog catalog({testing::ModelPath("stories260K")});
  auto model = catalog.Find("stories260K");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->size_bytes, 1185376);
}

}  // namespace
}  // namespace waste
