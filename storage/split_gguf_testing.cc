#include "storage/split_gguf_testing.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "storage/gguf.h"
#include "storage/gguf_writer.h"
#include "storage/split_gguf.h"

namespace waste::storage::testing {

absl::StatusOr<std::vector<std::string>> WriteSplitParts(Env* env, const std::string& in,
                                                         int parts) {
  if (!absl::EndsWith(in, ".gguf") || parts < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cannot split ", in, " in ", parts));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(env, in));
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(in));
  const std::string prefix = in.substr(0, in.size() - 5);
  const std::vector<TensorInfo>& tensors = gguf->tensors();
  const size_t per_part = (tensors.size() + parts - 1) / parts;
  std::vector<std::string> paths;
  for (int p = 0; p < parts; ++p) {
    const std::string path =
        absl::StrCat(prefix, absl::StrFormat("-%05d-of-%05d.gguf", p + 1, parts));
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> out, env->NewWritableFile(path));
    WritableFileSink sink(out.get());
    GgufWriter writer(&sink, {.alignment = gguf->alignment()});
    if (p == 0) {
      for (const auto& [key, value] : gguf->metadata()) {
        if (key != kGgufAlignmentKey) RETURN_IF_ERROR(writer.AddMetadata(key, value));
      }
    }
    RETURN_IF_ERROR(writer.AddUint16(kSplitNoKey, static_cast<uint16_t>(p)));
    RETURN_IF_ERROR(writer.AddUint16(kSplitCountKey, static_cast<uint16_t>(parts)));
    RETURN_IF_ERROR(writer.AddInt32(kSplitTensorsCountKey, static_cast<int32_t>(tensors.size())));
    const size_t begin = std::min(tensors.size(), p * per_part);
    const size_t end = std::min(tensors.size(), begin + per_part);
    for (size_t i = begin; i < end; ++i) {
      RETURN_IF_ERROR(
          writer.AddTensor(tensors[i].name, tensors[i].type, tensors[i].shape).status());
    }
    RETURN_IF_ERROR(writer.WriteHeader());
    for (size_t i = begin; i < end; ++i) {
      std::string bytes(tensors[i].size, '\0');
      RETURN_IF_ERROR(file->Read(tensors[i].offset, bytes.size(), bytes.data()));
      RETURN_IF_ERROR(writer.WriteTensorData(tensors[i].name, bytes));
    }
    RETURN_IF_ERROR(writer.Finish());
    RETURN_IF_ERROR(out->Close());
    paths.push_back(path);
  }
  return paths;
}

}  // namespace waste::storage::testing
