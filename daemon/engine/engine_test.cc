#include "daemon/engine/engine.h"

#include "gtest/gtest.h"
#include "tests/testdata.h"

namespace waste::engine {
namespace {

TEST(EngineTest, KeepAliveUnloadsIdleModelsOnly) {
  ModelCatalog catalog({testing::ModelPath("stories260K")});
  v1::DaemonConfig config;
  config.mutable_model_defaults()->set_keep_alive_seconds(30);
  Engine engine(storage::Env::Default(), &catalog, config);
  auto model = engine.Get("stories260K");
  ASSERT_TRUE(model.ok()) << model.status();
  const absl::Time used = (*model)->last_used();
  engine.UnloadIdle(used + absl::Seconds(10));
  EXPECT_EQ(engine.Loaded().size(), 1u);
  engine.UnloadIdle(used + absl::Seconds(31));
  EXPECT_TRUE(engine.Loaded().empty());
  // A request still holding the model keeps it usable after the unload.
  v1::TokenizeRequest request;
  request.set_text("Once");
  EXPECT_TRUE((*model)->Tokenize(request).ok());
}

TEST(EngineTest, WithoutKeepAliveModelsStayLoaded) {
  ModelCatalog catalog({testing::ModelPath("stories260K")});
  Engine engine(storage::Env::Default(), &catalog, v1::DaemonConfig());
  ASSERT_TRUE(engine.Get("").ok());  // The only model in the catalog.
  engine.UnloadIdle(absl::Now() + absl::Hours(24));
  EXPECT_EQ(engine.Loaded().size(), 1u);
}

}  // namespace
}  // namespace waste::engine
