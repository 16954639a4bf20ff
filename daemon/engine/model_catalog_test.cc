#include "daemon/engine/model_catalog.h"

#include <sys/stat.h>

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

TEST(ModelCatalogTest, ListsTheSharedStoriesModel) {
  ModelCatalog catalog({testing::ModelPath("stories260K")});
  auto model = catalog.Find("stories260K");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->size_bytes, 1185376);
}

}  // namespace
}  // namespace waste
