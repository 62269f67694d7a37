#include "optimized_model_cache.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <vector>

#include "file_access.h"
#include "log.h"
#include "model_file.h"
#include "port.h"

namespace ebb::detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Bump when the entry layout changes. 2: the checksum is seeded with the entry's id; files are checked
// (owner, mode, no links).
constexpr int kFormat = 2;

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The seed of an entry's checksum: the checksum of one key's entry does not verify under another key.
uint64_t SeedOf(const std::string& id) { return XXH3_64bits(id.data(), id.size()); }

// The rules for the cache's own files: this user's, not writable by others, no links.
FileRules EntryRules(const char* what, uint64_t max_bytes = 0) {
  return {.what = what, .own_private = true, .max_bytes = max_bytes};
}

// Writes `text` to `path` through a new private file and a rename.
bool WriteAtomically(const std::string& path, const std::string& text, const std::string& temporary) {
  std::error_code ec;
  fs::remove(temporary, ec);  // one left by a process that died with our pid (the name is ours)
  if (!WritePrivateFile(temporary, text).ok()) return false;
  fs::rename(temporary, path, ec);
  if (ec) fs::remove(temporary, ec);
  return !ec;
}

// The checksum of the file ORT wrote at `temporary`, streamed; its size in `bytes`. Makes the file private
// first (ORT created it with the process's umask).
Result<std::string> ChecksumOfWritten(const std::string& temporary, const std::string& id, uint64_t* bytes) {
  Result<CheckedFile> file = CheckedFile::Open(temporary, {.what = "the optimized model"});
  if (!file.ok()) return file.status();
  EBB_RETURN_IF_ERROR(file->MakePrivate());
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  if (!state || XXH3_64bits_reset_withSeed(state.get(), SeedOf(id)) != XXH_OK) return Internal("XXH3 unavailable");
  std::vector<char> chunk(1 << 20);
  *bytes = 0;
  while (true) {
    Result<size_t> n = file->Read(chunk.data(), chunk.size());
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    XXH3_64bits_update(state.get(), chunk.data(), *n);
    *bytes += *n;
  }
  if (*bytes == 0) return Internal("the optimized model ORT wrote is empty");
  return Hex64(XXH3_64bits_digest(state.get()));
}

// An entry's bytes as ORT will run them, which no later write to the file can change or make fault.
struct HeldEntry {
  std::shared_ptr<FileBytes> bytes;
  // The version of the file held, when it is mapped under a guard (a copy has none: the file may have
  // changed between its open and its read).
  std::optional<port::FileIdentity> guarded;
};

// Maps the entry under a guard (no copy), else, where the system has no guard for this file, copies it.
Result<HeldEntry> Hold(CheckedFile& file) {
  Result<std::shared_ptr<FileMapping>> mapped = file.Map();
  if (mapped.ok()) return HeldEntry{*mapped, (*mapped)->identity()};
  if (mapped.status().code() != StatusCode::kUnavailable) return mapped.status();
  LogInfo("optimized-model cache: " + mapped.status().message() + "; it is copied instead");
  Result<std::shared_ptr<FileCopy>> copy = file.Copy();
  if (!copy.ok()) return copy.status();
  return HeldEntry{std::move(copy).value(), std::nullopt};
}

json HeaderOf(const OptimizedModelKey& key) {
  return {{"format", kFormat},
          {"model_sha256", key.model_sha256},
          {"options", key.options},
          {"ort_version", key.ort_version},
          {"cpu_features", key.cpu_features}};
}

}  // namespace

std::string OptimizedModelKey::Id() const {
  const std::string text = std::to_string(kFormat) + "\n" + model_sha256 + "\n" + options + "\n" + ort_version +
                           "\n" + cpu_features;
  return Sha256Hex(text.data(), text.size()).substr(0, 32);
}

const std::string& CpuFeaturesHash() {
  static const std::string hash = [] {
    const std::string text = port::CpuFeatures();
    if (text.empty()) return std::string();
    return Sha256Hex(text.data(), text.size()).substr(0, 16);
  }();
  return hash;
}

std::string OptimizedModelCache::FolderFor(const OptimizedModelCachePolicy& policy) {
  if (!policy.dir.empty()) return policy.dir;
  if (const char* dir = std::getenv("EBB_CACHE_DIR"); dir && *dir) return dir;
  if (std::string user = port::UserCacheFolder(); !user.empty()) return user + "/ebb/optimized-models";
  return "";
}

Result<std::unique_ptr<OptimizedModelCache>> OptimizedModelCache::Open(const std::string& folder,
                                                                       uint64_t max_bytes) {
  if (folder.empty()) return Unavailable("no cache folder (set optimized_model_cache.dir or EBB_CACHE_DIR)");
  if (CpuFeaturesHash().empty()) return Unavailable("the CPU's feature flags cannot be read");
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    fs::create_directories(folder, ec);
    if (ec) return FailedPrecondition("cannot create the cache folder '" + folder + "': " + ec.message());
    fs::permissions(folder, fs::perms::owner_all, fs::perm_options::replace, ec);
  }
  // Whoever can write the folder decides what ORT runs (and can truncate an entry in use): only this user.
  if (Status st = CheckPrivateFolder(folder); !st.ok()) return FailedPrecondition("refused: " + st.message());
  if (!port::FolderWritable(folder)) {
    return FailedPrecondition("the cache folder '" + folder + "' is not writable");
  }
  return std::unique_ptr<OptimizedModelCache>(new OptimizedModelCache(folder, max_bytes));
}

std::string OptimizedModelCache::PathOf(const std::string& id, const char* extension) const {
  return folder_ + "/" + id + extension;
}

std::shared_ptr<FileBytes> OptimizedModelCache::Find(const OptimizedModelKey& key, std::string* why) {
  const std::string id = key.Id();
  auto bad = [&](const std::string& what) -> std::shared_ptr<FileBytes> {
    if (why) *why = what;
    Remove(key);
    return nullptr;
  };
  if (why) why->clear();
  Result<std::string> header_text =
      ReadCheckedFile(PathOf(id, ".json"), EntryRules("the entry's header", kMaxHeaderBytes));
  if (!header_text.ok()) {
    if (header_text.status().code() != StatusCode::kNotFound) return bad(header_text.status().message());
    std::error_code ec;
    if (fs::symlink_status(PathOf(id, ".ort"), ec).type() != fs::file_type::not_found) {
      return bad("entry without its header");
    }
    return nullptr;  // a plain miss
  }
  json header = json::parse(*header_text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return bad("unreadable header");
  json expected = HeaderOf(key);
  for (const auto& [name, value] : expected.items()) {
    if (!header.contains(name) || header[name] != value) return bad("entry made for another key (" + name + ")");
  }
  if (!header.contains("bytes") || !header["bytes"].is_number_unsigned() || !header.contains("checksum") ||
      !header["checksum"].is_string()) {
    return bad("header without size or checksum");
  }
  Result<CheckedFile> file = CheckedFile::Open(PathOf(id, ".ort"), EntryRules("the entry"));
  if (!file.ok()) return bad(file.status().message());
  if (file->size() != header["bytes"].get<uint64_t>()) return bad("truncated or extended entry");
  Result<HeldEntry> held = Hold(*file);
  if (!held.ok()) return bad("cannot read the entry: " + held.status().message());
  const FileBytes& bytes = *held->bytes;
  if (!(held->guarded && VerifiedBefore(id, *held->guarded))) {
    if (Hex64(XXH3_64bits_withSeed(bytes.data(), bytes.size(), SeedOf(id))) != header["checksum"].get<std::string>()) {
      return bad("corrupt entry, or one made for another key (checksum mismatch)");
    }
    if (held->guarded && Settled(*held->guarded)) RememberVerified(id, *held->guarded);
  }
  // Last use, for the least-recently-used trim.
  port::TouchFile(PathOf(id, ".json"));
  return std::move(held->bytes);
}

std::string OptimizedModelCache::TemporaryPath(const OptimizedModelKey& key) {
  static std::atomic<uint64_t> counter{0};
  return PathOf(key.Id(), ".ort") + ".tmp." + std::to_string(port::ProcessId()) + "." + std::to_string(++counter);
}

Status OptimizedModelCache::Commit(const OptimizedModelKey& key, const std::string& temporary) {
  std::error_code ec;
  const std::string id = key.Id();
  uint64_t bytes = 0;
  Result<std::string> checksum = ChecksumOfWritten(temporary, id, &bytes);
  if (!checksum.ok()) {
    fs::remove(temporary, ec);
    return Internal("the optimized model was not written: " + checksum.status().message());
  }
  if (bytes > max_bytes_) {
    fs::remove(temporary, ec);
    return ResourceExhausted("the optimized model (" + std::to_string(bytes) +
                             " bytes) is larger than the cache's bound of " + std::to_string(max_bytes_) + " bytes");
  }
  json header = HeaderOf(key);
  header["bytes"] = bytes;
  header["checksum"] = *checksum;
  fs::rename(temporary, PathOf(id, ".ort"), ec);
  if (ec) {
    fs::remove(temporary, ec);
    return Internal("cannot move the optimized model into the cache: " + ec.message());
  }
  if (!WriteAtomically(PathOf(id, ".json"), header.dump(2) + "\n", temporary + ".json")) {
    Remove(key);
    return Internal("cannot write the cache entry's header in '" + folder_ + "'");
  }
  Trim(id);
  return Status::Ok();
}

void OptimizedModelCache::Remove(const OptimizedModelKey& key) {
  std::error_code ec;
  const std::string id = key.Id();
  fs::remove(PathOf(id, ".json"), ec);  // the header first: without it the entry is a miss
  fs::remove(PathOf(id, ".ort"), ec);
}

bool OptimizedModelCache::VerifiedBefore(const std::string& id, const port::FileIdentity& identity) const {
  std::lock_guard<std::mutex> lock(verified_mu_);
  auto it = verified_.find(id);
  return it != verified_.end() && it->second == identity;
}

void OptimizedModelCache::RememberVerified(const std::string& id, const port::FileIdentity& identity) {
  std::lock_guard<std::mutex> lock(verified_mu_);
  if (verified_.size() >= kMaxVerified) verified_.clear();
  verified_[id] = identity;
}

void OptimizedModelCache::MarkUncacheable(const OptimizedModelKey& key) {
  std::lock_guard<std::mutex> lock(uncacheable_mu_);
  uncacheable_.insert(key.Id());
}

bool OptimizedModelCache::IsUncacheable(const OptimizedModelKey& key) const {
  std::lock_guard<std::mutex> lock(uncacheable_mu_);
  return uncacheable_.count(key.Id()) > 0;
}

uint64_t OptimizedModelCache::TotalBytes() const {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder_, ec)) {
    if (e.symlink_status(ec).type() == fs::file_type::regular) total += e.file_size(ec);
  }
  return total;
}

void OptimizedModelCache::Trim(const std::string& keep) {
  std::lock_guard<std::mutex> lock(trim_mu_);
  struct Entry {
    std::string id;
    fs::file_time_type used;
    uint64_t bytes = 0;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  const auto stale_before = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (const auto& e : fs::directory_iterator(folder_, ec)) {
    if (e.symlink_status(ec).type() != fs::file_type::regular) continue;  // links are never ours
    const std::string name = e.path().filename().string();
    const uint64_t size = e.file_size(ec);
    const bool temporary = name.find(".tmp.") != std::string::npos;
    const bool orphan = name.size() == 32 + 4 && name.ends_with(".ort") && !fs::exists(PathOf(name.substr(0, 32), ".json"), ec);
    if ((temporary || orphan) && e.last_write_time(ec) < stale_before) {
      fs::remove(e.path(), ec);  // left by a writer that died
      continue;
    }
    total += size;
    if (name.size() == 32 + 5 && name.ends_with(".json")) {
      const std::string id = name.substr(0, 32);
      const uint64_t model_bytes = fs::file_size(PathOf(id, ".ort"), ec);
      entries.push_back({id, e.last_write_time(ec), size + (ec ? 0 : model_bytes)});
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (total <= max_bytes_) break;
    if (e.id == keep) continue;
    fs::remove(PathOf(e.id, ".json"), ec);
    fs::remove(PathOf(e.id, ".ort"), ec);
    total -= std::min(total, e.bytes);
  }
}

}  // namespace ebb::detail
