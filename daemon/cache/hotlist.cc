#include "daemon/cache/hotlist.h"

#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace waste::cache {
namespace {

constexpr char kMagic[] = "waste-expert-hotlist v1";

uint64_t Fnv1a(std::string_view data, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string Hex(uint64_t v) { return absl::StrCat(absl::Hex(v, absl::kZeroPad16)); }

// "key value" with the given key; the value is the rest of the line.
bool Field(absl::string_view line, absl::string_view key, std::string* value) {
  if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, " ")) return false;
  *value = std::string(line);
  return true;
}

}  // namespace

absl::StatusOr<ModelFileIdentity> IdentifyModelFile(storage::Env* env, const std::string& path,
                                                    std::span<const ChunkSpec> chunks) {
  ModelFileIdentity id;
  id.path = path;
  ASSIGN_OR_RETURN(id.size, env->GetFileSize(path));
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  }
  uint64_t h = Fnv1a("");
  for (const ChunkSpec& c : chunks) {
    h = Fnv1a(c.name, h);
    for (const ChunkRead& r : c.reads) {
      h = Fnv1a(absl::StrCat(":", r.file_offset, "+", r.length), h);
    }
  }
  id.layout_hash = h;
  id.chunk_count = chunks.size();
  return id;
}

std::string ModelPathKey(const std::string& model_path) { return Hex(Fnv1a(model_path)); }

std::string HotlistPathFor(const std::string& state_dir, const std::string& model_path) {
  return absl::StrCat(state_dir, "/hotlist-", ModelPathKey(model_path), ".txt");
}

absl::Status SaveHotlist(storage::Env* env, const std::string& hotlist_path,
                         const ModelFileIdentity& identity, std::span<const ChunkSpec> chunks,
                         std::span<const uint32_t> uses, std::span<const HotlistEntry> previous) {
  if (uses.size() != chunks.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("hotlist: ", uses.size(), " use counts for ", chunks.size(), " chunks"));
  }
  std::vector<uint64_t> total(uses.begin(), uses.end());
  for (const HotlistEntry& e : previous) {
    if (e.chunk >= 0 && static_cast<size_t>(e.chunk) < total.size()) total[e.chunk] += e.uses / 2;
  }
  std::vector<HotlistEntry> entries;
  for (const ChunkSpec& c : chunks) {
    if (c.kind == ChunkKind::kExpert && total[c.id] > 0) entries.push_back({c.id, total[c.id]});
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const HotlistEntry& a, const HotlistEntry& b) { return a.uses > b.uses; });
  std::string body;
  for (const HotlistEntry& e : entries) {
    absl::StrAppend(&body, e.chunk, " ", e.uses, " ", chunks[e.chunk].name, "\n");
  }
  std::string out = absl::StrCat(
      kMagic, "\nmodel ", identity.path, "\nsize ", identity.size, "\nmtime_ns ", identity.mtime_ns,
      "\nlayout ", Hex(identity.layout_hash), "\nchunks ", identity.chunk_count, "\nentries ",
      entries.size(), "\nchecksum ", Hex(Fnv1a(body)), "\n", body);
  absl::Status status = storage::WriteFileAtomically(env, hotlist_path, out);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("writing the expert hotlist ", hotlist_path,
                                                    ": ", status.message(),
                                                    "; check that the state directory exists "
                                                    "and is writable"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<HotlistEntry>> LoadHotlist(storage::Env* env,
                                                      const std::string& hotlist_path,
                                                      const ModelFileIdentity& identity,
                                                      std::span<const ChunkSpec> chunks) {
  if (!env->FileExists(hotlist_path)) {
    return absl::NotFoundError(absl::StrCat("no expert hotlist at ", hotlist_path));
  }
  ASSIGN_OR_RETURN(std::string text, storage::ReadFileToString(env, hotlist_path));
  auto corrupt = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("expert hotlist ", hotlist_path, " is corrupt (", why,
                                            "); it is ignored and rewritten at the next save"));
  };
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines.size() < 8 || lines[0] != kMagic) return corrupt("no 'waste-expert-hotlist v1' header");
  ModelFileIdentity found;
  std::string v[7];
  const char* keys[7] = {"model", "size", "mtime_ns", "layout", "chunks", "entries", "checksum"};
  for (int i = 0; i < 7; ++i) {
    if (!Field(lines[i + 1], keys[i], &v[i])) return corrupt(absl::StrCat("no '", keys[i], "'"));
  }
  found.path = v[0];
  uint64_t entries = 0, checksum = 0;
  if (!absl::SimpleAtoi(v[1], &found.size) || !absl::SimpleAtoi(v[2], &found.mtime_ns) ||
      !absl::SimpleHexAtoi(v[3], &found.layout_hash) ||
      !absl::SimpleAtoi(v[4], &found.chunk_count) || !absl::SimpleAtoi(v[5], &entries) ||
      !absl::SimpleHexAtoi(v[6], &checksum)) {
    return corrupt("a header number does not parse");
  }
  const size_t body_start = text.find("\nchecksum ");
  const size_t body_at = text.find('\n', body_start + 1) + 1;
  if (Fnv1a(std::string_view(text).substr(body_at)) != checksum) {
    return corrupt("checksum mismatch");
  }
  if (!(found == identity)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "expert hotlist ", hotlist_path, " was recorded for ", found.path, " (", found.size,
        " bytes, mtime ", found.mtime_ns, ", layout ", Hex(found.layout_hash), "), not for ",
        identity.path, " (", identity.size, " bytes, mtime ", identity.mtime_ns, ", layout ",
        Hex(identity.layout_hash), "); it is ignored and replaced at the next save"));
  }
  std::vector<HotlistEntry> out;
  for (size_t i = 8; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], ' ');
    HotlistEntry e;
    if (f.size() != 3 || !absl::SimpleAtoi(f[0], &e.chunk) || !absl::SimpleAtoi(f[1], &e.uses) ||
        e.chunk < 0 || static_cast<size_t>(e.chunk) >= chunks.size() ||
        chunks[e.chunk].kind != ChunkKind::kExpert || chunks[e.chunk].name != f[2]) {
      return corrupt(absl::StrCat("line ", i + 1, " is not 'ID USES NAME' of an expert chunk"));
    }
    out.push_back(e);
  }
  if (out.size() != entries) return corrupt("entry count mismatch");
  return out;
}

absl::StatusOr<std::vector<HotlistEntry>> WarmExpertCache(
    storage::Env* env, const std::string& hotlist_path, const ModelFileIdentity& identity,
    std::span<const ChunkSpec> chunks, StreamingChunkStore* store, int* preloaded) {
  *preloaded = 0;
  absl::StatusOr<std::vector<HotlistEntry>> entries =
      LoadHotlist(env, hotlist_path, identity, chunks);
  if (!entries.ok()) {
    if (!absl::IsNotFound(entries.status())) {
      WLOG(WARNING) << entries.status().message() << "; starting with a cold expert cache";
    }
    return std::vector<HotlistEntry>();
  }
  // Seed counts scaled to at most 32 uses: enough that the hot set outranks
  // experts used once or twice, not so much that it outlives a change of
  // topic by thousands of tokens.
  const uint64_t top = entries->empty() ? 1 : std::max<uint64_t>(1, entries->front().uses);
  std::vector<ChunkId> ids;
  std::vector<uint64_t> seeds;
  for (const HotlistEntry& e : *entries) {
    ids.push_back(e.chunk);
    seeds.push_back(std::max<uint64_t>(1, e.uses * 32 / top));
  }
  ASSIGN_OR_RETURN(*preloaded, store->Preload(ids, seeds));
  return entries;
}

}  // namespace waste::cache
