#include "model_file.h"

#include <chrono>
#include <mutex>
#include <optional>
#include <vector>

namespace ebb::detail {
namespace {

// Hashes of files that have not changed since, by identity (Sha256OfFile).
class HashMemo {
 public:
  std::optional<std::string> Find(const FileIdentity& id) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [known, hash] : entries_) {
      if (known == id) return hash;
    }
    return std::nullopt;
  }
  void Insert(const FileIdentity& id, const std::string& hash) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= 1024) entries_.clear();
    entries_.emplace_back(id, hash);
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<FileIdentity, std::string>> entries_;  // guarded by mu_
};

HashMemo& Memo() {
  static HashMemo memo;
  return memo;
}

// Opens `path` read-only and checks it is a non-empty regular file. A FIFO or device put in its place
// returns at once (and is refused) instead of blocking the open.
Result<port::ReadOnlyFile> OpenRegular(const std::string& path, port::FileInfo* info) {
  Result<port::ReadOnlyFile> file = port::ReadOnlyFile::Open(path, /*no_follow=*/false);
  if (!file.ok()) {
    if (file.status().code() == StatusCode::kNotFound) return NotFound("model file '" + path + "' does not exist");
    return NotFound("cannot open model file '" + path + "': " + file.status().message());
  }
  Result<port::FileInfo> got = file->Info();
  if (!got.ok()) return Internal("cannot stat '" + path + "': " + got.status().message());
  if (got->kind != port::FileKind::kRegular) return InvalidArgument("'" + path + "' is not a model file");
  if (got->identity.size == 0) return InvalidArgument("model file '" + path + "' is empty");
  *info = *got;
  return file;
}

}  // namespace

bool Settled(const FileIdentity& identity) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  return now - identity.ctime_ns > 2'000'000'000;
}

Result<FileIdentity> StatFile(const std::string& path) {
  Result<port::FileInfo> info = port::StatPath(path, /*follow_links=*/true);
  if (!info.ok()) return NotFound("cannot stat '" + path + "': " + info.status().message());
  if (info->kind != port::FileKind::kRegular) return InvalidArgument("'" + path + "' is not a regular file");
  return info->identity;
}

std::string Sha256Hex(const void* data, size_t size) {
  port::Sha256 sha;
  sha.Update(data, size);
  return sha.Hex();
}

Result<std::string> Sha256OfFile(const std::string& path, FileIdentity* identity) {
  port::FileInfo st;
  Result<port::ReadOnlyFile> file = OpenRegular(path, &st);
  if (!file.ok()) return file.status();
  if (identity) *identity = st.identity;
  if (std::optional<std::string> known = Memo().Find(st.identity)) return *known;
  const bool settled = Settled(st.identity);
  port::Sha256 sha;
  if (!sha.ok()) return Internal("SHA-256 unavailable");
  std::vector<char> chunk(1 << 20);
  while (true) {
    Result<size_t> n = file->Read(chunk.data(), chunk.size());
    if (!n.ok()) return Internal("cannot read '" + path + "': " + n.status().message());
    if (*n == 0) break;
    sha.Update(chunk.data(), *n);
  }
  const std::string hash = sha.Hex();
  // Re-stat: a write while reading moved the ctime, and then nothing is remembered.
  Result<port::FileInfo> after = file->Info();
  if (settled && after.ok() && after->identity == st.identity) Memo().Insert(st.identity, hash);
  return hash;
}

}  // namespace ebb::detail
