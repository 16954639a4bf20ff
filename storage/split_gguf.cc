#include "storage/split_gguf.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "storage/aligned_buffer.h"
#include "storage/gguf.h"

namespace waste::storage {
namespace {

// "-NNNNN-of-NNNNN.gguf": what follows a split part's prefix.
constexpr size_t kSuffixLength = 20;

// The prefix of a part's path whose suffix names part `index` of `count`.
absl::StatusOr<std::string> SplitPrefix(const std::string& path, int index, int count) {
  const std::optional<SplitName> name = ParseSplitName(path);
  if (name.has_value() && name->index == index && name->count == count) return name->prefix;
  return absl::InvalidArgumentError(absl::StrCat(
      path, " holds part ", index + 1, " of a model split in ", count,
      ", but its name does not end in '", absl::StrFormat("-%05d-of-%05d.gguf", index + 1, count),
      "' as gguf-split names the parts, so the others cannot be found"));
}

// split.count of a parsed part (1 when absent: not split), and its split.no.
absl::StatusOr<int> SplitCount(const GgufFile& gguf) {
  if (!gguf.Has(kSplitCountKey)) return 1;
  ASSIGN_OR_RETURN(const uint64_t count, gguf.GetUint(kSplitCountKey));
  if (count < 1 || count > 99999) {
    return absl::InvalidArgumentError(
        absl::StrCat(gguf.path(), ": ", kSplitCountKey, " ", count, " is out of range"));
  }
  return static_cast<int>(count);
}

absl::StatusOr<int> SplitNo(const GgufFile& gguf, int count) {
  ASSIGN_OR_RETURN(const uint64_t no, gguf.GetUint(kSplitNoKey));
  if (no >= static_cast<uint64_t>(count)) {
    return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": ", kSplitNoKey, " ", no,
                                                   " is not below ", kSplitCountKey, " ", count));
  }
  return static_cast<int>(no);
}

// The count of a model `gguf` is the first part of; an error naming the
// first part when it is another part.
absl::StatusOr<int> FirstPartCount(const GgufFile& gguf) {
  ASSIGN_OR_RETURN(const int count, SplitCount(gguf));
  if (count == 1) return 1;
  ASSIGN_OR_RETURN(const int no, SplitNo(gguf, count));
  if (no != 0) {
    absl::StatusOr<std::string> prefix = SplitPrefix(gguf.path(), no, count);
    return absl::InvalidArgumentError(absl::StrCat(
        gguf.path(), " is part ", no + 1, " of a model split in ", count, ": open its first part",
        prefix.ok() ? absl::StrCat(", ", *prefix, absl::StrFormat("-%05d-of-%05d.gguf", 1, count))
                    : ""));
  }
  return count;
}

}  // namespace

std::optional<SplitName> ParseSplitName(std::string_view path) {
  if (path.size() <= kSuffixLength) return std::nullopt;
  const std::string_view suffix = path.substr(path.size() - kSuffixLength);
  if (suffix[0] != '-' || suffix.substr(6, 4) != "-of-" || suffix.substr(15) != ".gguf") {
    return std::nullopt;
  }
  int number[2] = {0, 0};  // Part, count: 5 digits each.
  for (int k = 0; k < 2; ++k) {
    for (char c : suffix.substr(1 + 9 * k, 5)) {
      if (c < '0' || c > '9') return std::nullopt;
      number[k] = 10 * number[k] + (c - '0');
    }
  }
  if (number[0] < 1 || number[1] < number[0]) return std::nullopt;
  return SplitName{std::string(path.substr(0, path.size() - kSuffixLength)), number[0] - 1,
                   number[1]};
}

absl::StatusOr<std::string> SplitPartPath(const std::string& first, int index, int count) {
  ASSIGN_OR_RETURN(const std::string prefix, SplitPrefix(first, 0, count));
  return absl::StrCat(prefix, absl::StrFormat("-%05d-of-%05d.gguf", index + 1, count));
}

std::vector<uint64_t> SplitBases(const std::vector<uint64_t>& sizes) {
  std::vector<uint64_t> bases;
  uint64_t next = 0;
  for (uint64_t size : sizes) {
    bases.push_back(next);
    next = AlignUp(next + size + kSplitGap, kDirectIoAlignment);
  }
  return bases;
}

JoinedFile::JoinedFile(std::vector<std::unique_ptr<RandomAccessFile>> parts)
    : parts_(std::move(parts)) {
  std::vector<uint64_t> sizes;
  for (const auto& part : parts_) sizes.push_back(part->Size());
  bases_ = SplitBases(sizes);
  size_ = bases_.back() + sizes.back();
}

absl::Status JoinedFile::Read(uint64_t offset, size_t n, char* buffer) const {
  if (offset > size_ || n > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat(Path(), " (", parts_.size(), " parts): read of ", n,
                                              " bytes at ", offset, " past the end (", size_, ")"));
  }
  while (n > 0) {
    const size_t i = std::upper_bound(bases_.begin(), bases_.end(), offset) - bases_.begin() - 1;
    const uint64_t part_end = bases_[i] + parts_[i]->Size();
    uint64_t take;
    if (offset < part_end) {
      take = std::min<uint64_t>(n, part_end - offset);
      RETURN_IF_ERROR(parts_[i]->Read(offset - bases_[i], take, buffer));
    } else {  // The hole after part i.
      const uint64_t hole_end = i + 1 < bases_.size() ? bases_[i + 1] : size_;
      take = std::min<uint64_t>(n, hole_end - offset);
      std::memset(buffer, 0, take);
    }
    offset += take;
    buffer += take;
    n -= take;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenModelFile(Env* env, const GgufFile& gguf,
                                                                const ReadOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                   env->NewRandomAccessFile(gguf.path(), options));
  const int count = gguf.split_count();
  if (count == 1) return file;
  std::vector<std::unique_ptr<RandomAccessFile>> parts;
  parts.push_back(std::move(file));
  for (int i = 1; i < count; ++i) {
    ASSIGN_OR_RETURN(const std::string part_path, SplitPartPath(gguf.path(), i, count));
    ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> part,
                     env->NewRandomAccessFile(part_path, options));
    parts.push_back(std::move(part));
  }
  return std::unique_ptr<RandomAccessFile>(std::make_unique<JoinedFile>(std::move(parts)));
}

// Declared a friend in gguf.h: appends the other parts' tensors to the
// first part's GgufFile at their joined offsets.
absl::Status GgufSplitJoiner::Join(Env* env, GgufFile* first) {
  ASSIGN_OR_RETURN(const int count, FirstPartCount(*first));
  if (count == 1) return absl::OkStatus();
  std::vector<uint64_t> sizes = {first->file_size_};
  std::vector<std::unique_ptr<GgufFile>> parts;
  for (int i = 1; i < count; ++i) {
    ASSIGN_OR_RETURN(const std::string part_path, SplitPartPath(first->path_, i, count));
    ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, env->NewRandomAccessFile(part_path));
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> part, GgufFile::Parse(*file));
    ASSIGN_OR_RETURN(const int part_count, SplitCount(*part));
    if (part_count != count) {
      return absl::InvalidArgumentError(absl::StrCat(
          part_path, ": ", kSplitCountKey, " ", part_count, ", but the first part says ", count));
    }
    ASSIGN_OR_RETURN(const int no, SplitNo(*part, count));
    if (no != i) {
      return absl::InvalidArgumentError(
          absl::StrCat(part_path, ": ", kSplitNoKey, " ", no, " where part ", i, " belongs"));
    }
    sizes.push_back(part->file_size_);
    parts.push_back(std::move(part));
  }
  const std::vector<uint64_t> bases = SplitBases(sizes);
  for (size_t p = 0; p < parts.size(); ++p) {
    for (TensorInfo& t : parts[p]->tensors_) {
      t.offset += bases[p + 1];
      if (!first->tensor_index_.emplace(t.name, first->tensors_.size()).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(parts[p]->path_, ": tensor '", t.name, "' is in an earlier part as well"));
      }
      first->tensors_.push_back(std::move(t));
    }
  }
  if (first->Has(kSplitTensorsCountKey)) {
    ASSIGN_OR_RETURN(const uint64_t expected, first->GetUint(kSplitTensorsCountKey));
    if (expected != first->tensors_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(first->path_, ": the ", count, " parts hold ",
                                                     first->tensors_.size(), " tensors, ",
                                                     kSplitTensorsCountKey, " says ", expected));
    }
  }
  first->file_size_ = bases.back() + sizes.back();
  first->disk_bytes_ = 0;
  for (uint64_t size : sizes) first->disk_bytes_ += size;
  first->split_count_ = count;
  return absl::OkStatus();
}

}  // namespace waste::storage
