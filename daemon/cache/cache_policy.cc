#include "daemon/cache/cache_policy.h"

#include "absl/strings/str_cat.h"

namespace waste::cache {

const char* PolicyKindName(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kLru:
      return "lru";
    case PolicyKind::kLfu:
      return "lfu";
    case PolicyKind::kLfuAged:
      return "lfu-aged";
  }
  return "?";
}

absl::StatusOr<PolicyKind> ParsePolicyKind(absl::string_view name) {
  if (name == "lru") return PolicyKind::kLru;
  if (name == "lfu") return PolicyKind::kLfu;
  if (name == "lfu-aged") return PolicyKind::kLfuAged;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown cache policy '", name, "'; choose lru, lfu or lfu-aged"));
}

std::unique_ptr<CachePolicy> NewCachePolicy(PolicyKind kind, int n_chunks) {
  switch (kind) {
    case PolicyKind::kLru:
      return NewLruPolicy(n_chunks);
    case PolicyKind::kLfu:
      return NewLfuPolicy(n_chunks);
    case PolicyKind::kLfuAged:
      return NewLfuAgedPolicy(n_chunks);
  }
  return nullptr;
}

}  // namespace waste::cache
