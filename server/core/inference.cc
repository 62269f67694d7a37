#include "inference.h"

namespace ebb::server {

Result<int64_t> CheckKeepAlive(std::optional<int64_t> ms, std::string_view as_sent) {
  if (ms && *ms <= kMaxKeepAliveMs) return *ms;
  return InvalidArgument("parameters.keep_alive must be an integer (milliseconds) of at most " +
                         std::to_string(kMaxKeepAliveMs) + " (365 days; negative: never unload), got " +
                         std::string(as_sent));
}

std::string SequenceIdText(const SequenceId& id) {
  if (const uint64_t* n = std::get_if<uint64_t>(&id)) return std::to_string(*n);
  return std::get<std::string>(id);
}

std::string SequenceIdForMessage(const SequenceId& id) { return Clip(SequenceIdText(id)); }

Result<SequenceControl> MakeSequenceControl(std::optional<SequenceId> id, bool start, bool end) {
  if (const std::string* text = id ? std::get_if<std::string>(&*id) : nullptr; text && text->size() > kMaxSequenceIdBytes) {
    return InvalidArgument("parameters.sequence_id is a string of " + std::to_string(text->size()) +
                           " bytes, longer than the limit of " + std::to_string(kMaxSequenceIdBytes) + " bytes");
  }
  const bool none = !id || (std::holds_alternative<uint64_t>(*id) && std::get<uint64_t>(*id) == 0) ||
                    (std::holds_alternative<std::string>(*id) && std::get<std::string>(*id).empty());
  if (none) return SequenceControl{};
  return SequenceControl{std::move(id), start, end};
}

}  // namespace ebb::server
