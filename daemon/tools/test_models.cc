#include "daemon/tools/test_models.h"

#include "common/status_macros.h"
#include "storage/gguf_writer.h"
#include "storage/split_gguf.h"

namespace waste::tools::testing {

absl::Status WriteModel(const tools::MkModelOptions& options, const MetadataOverrides& overrides) {
  storage::Env* env = storage::Env::Default();
  tools::MkModelOptions first = options;
  if (!overrides.empty()) first.out = options.out + ".base";
  RETURN_IF_ERROR(tools::WriteSyntheticModel(first, env).status());
  if (overrides.empty()) return absl::OkStatus();

  ASSIGN_OR_RETURN(auto gguf, storage::GgufFile::Open(env, first.out));
  ASSIGN_OR_RETURN(auto in, env->NewRandomAccessFile(first.out));
  ASSIGN_OR_RETURN(auto out, env->NewWritableFile(options.out));
  storage::WritableFileSink sink(out.get());
  storage::GgufWriter writer(&sink);
  for (const auto& [key, value] : gguf->metadata()) {
    if (key == "general.alignment") continue;
    bool replaced = false;
    for (const auto& [k, v] : overrides) replaced |= k == key;
    if (!replaced) RETURN_IF_ERROR(writer.AddMetadata(key, value));
  }
  for (const auto& [key, value] : overrides) RETURN_IF_ERROR(writer.AddMetadata(key, value));
  for (const storage::TensorInfo& t : gguf->tensors()) {
    RETURN_IF_ERROR(writer.AddTensor(t.name, t.type, t.shape).status());
  }
  RETURN_IF_ERROR(writer.WriteHeader());
  for (const storage::TensorInfo& t : gguf->tensors()) {
    std::string bytes(t.size, '\0');
    RETURN_IF_ERROR(in->Read(t.offset, t.size, bytes.data()));
    RETURN_IF_ERROR(writer.AppendTensorData(t.name, bytes));
  }
  RETURN_IF_ERROR(writer.Finish());
  RETURN_IF_ERROR(out->Close());
  return env->DeleteFile(first.out);
}

absl::StatusOr<LoadedModel> LoadModel(const std::string& path) {
  storage::Env* env = storage::Env::Default();
  LoadedModel m;
  ASSIGN_OR_RETURN(m.gguf, storage::GgufFile::Open(env, path));
  ASSIGN_OR_RETURN(m.model, model::Model::Create(*m.gguf));
  ASSIGN_OR_RETURN(m.file, storage::OpenModelFile(env, *m.gguf));
  ASSIGN_OR_RETURN(m.store, cache::ResidentChunkStore::Load(env, *m.file, m.model->chunks(), {}));
  return m;
}

}  // namespace waste::tools::testing
