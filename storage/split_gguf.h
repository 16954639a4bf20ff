// Models split by llama.cpp's gguf-split (`llama-gguf-split --split`), as
// the large models are published: parts named PREFIX-00001-of-0000N.gguf,
// each a GGUF of its own holding a share of the tensors; the first has
// every metadata key, every part split.no (0-based), split.count and
// split.tensors.count. llama.cpp opens such a model by its first part;
// so does waste.
//
// The parts are read as one file: laid end to end in one address space
// (JoinedFile), part i at SplitBases()[i], with a hole of at least
// kSplitGap bytes after each part that reads as zeros. GgufFile::Open
// lists every part's tensors at their offsets in that space, so chunk
// reads, the memory plan and the stores work unchanged; the hole is wider
// than any gap a chunk read merges across (1 MiB), so a read never joins
// tensors of two parts, and a read rounded up past a part's end (O_DIRECT's
// 4 KiB) gets zeros there.
#ifndef WASTE_STORAGE_SPLIT_GGUF_H_
#define WASTE_STORAGE_SPLIT_GGUF_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/env.h"
#include "storage/gguf.h"

namespace waste::storage {

inline constexpr char kSplitNoKey[] = "split.no";
inline constexpr char kSplitCountKey[] = "split.count";
inline constexpr char kSplitTensorsCountKey[] = "split.tensors.count";
inline constexpr uint64_t kSplitGap = uint64_t{64} << 20;

// A part's path taken apart: "dir/m-00002-of-00003.gguf" -> {"dir/m", 1,
// 3}; nullopt when the name is not gguf-split's (no "-NNNNN-of-NNNNN.gguf"
// with 1 <= NNNNN <= count).
struct SplitName {
  std::string prefix;
  int index = 0;  // 0-based.
  int count = 0;
};
std::optional<SplitName> ParseSplitName(std::string_view path);

// The path of part `index` (0-based) of `count` next to the first part
// `first`: "m-00001-of-00003.gguf", 1 -> "m-00002-of-00003.gguf", as
// llama.cpp's llama_split_path names them. INVALID_ARGUMENT when `first`
// does not end in "-00001-of-NNNNN.gguf" with NNNNN = count.
absl::StatusOr<std::string> SplitPartPath(const std::string& first, int index, int count);

// Where parts of these sizes start in the joined address space: 0, then
// each after the one before, its size and kSplitGap, rounded up to 4 KiB
// (so that offsets keep their O_DIRECT alignment inside a part).
std::vector<uint64_t> SplitBases(const std::vector<uint64_t>& sizes);

// The parts of a split model read as one file (see above). Thread-safe as
// its parts are.
class JoinedFile final : public RandomAccessFile {
 public:
  // `parts` in order, all direct or all not.
  explicit JoinedFile(std::vector<std::unique_ptr<RandomAccessFile>> parts);

  // A read may span parts and holes; only bytes past the last part's end
  // are OUT_OF_RANGE.
  absl::Status Read(uint64_t offset, size_t n, char* buffer) const override;
  // The address space's extent: the last part's base plus its size.
  uint64_t Size() const override { return size_; }
  // The first part's path.
  const std::string& Path() const override { return parts_[0]->Path(); }
  bool Direct() const override { return parts_[0]->Direct(); }
  size_t Alignment() const override { return parts_[0]->Alignment(); }

  size_t part_count() const { return parts_.size(); }

 private:
  std::vector<std::unique_ptr<RandomAccessFile>> parts_;
  std::vector<uint64_t> bases_;
  uint64_t size_ = 0;
};

// The files of `gguf` (opened by GgufFile::Open) for reading tensor data
// at the offsets it gives: its file, or a split model's parts joined.
absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenModelFile(Env* env, const GgufFile& gguf,
                                                                const ReadOptions& options = {});

}  // namespace waste::storage

#endif  // WASTE_STORAGE_SPLIT_GGUF_H_
