#include "optimized_model_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace ebb::detail {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kFormat = 1;  // bump when the entry layout changes

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes `text` to `path` through a temporary file and a rename.
bool WriteAtomically(const std::string& path, const std::string& text, const std::string& temporary) {
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return false;
  }
  std::error_code ec;
  fs::rename(temporary, path, ec);
  if (ec) fs::remove(temporary, ec);
  return !ec;
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
    std::ifstream in("/proc/cpuinfo");
    std::string line, vendor, flags;
    while (std::getline(in, line) && flags.empty()) {
      auto value = [&line] { return line.substr(line.find(':') + 1); };
      if (line.rfind("vendor_id", 0) == 0 || line.rfind("CPU implementer", 0) == 0) vendor = value();
      if (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) flags = value();
    }
    if (flags.empty()) return std::string();
    const std::string text = vendor + "|" + flags;
    return Sha256Hex(text.data(), text.size()).substr(0, 16);
  }();
  return hash;
}

std::string OptimizedModelCache::FolderFor(const OptimizedModelCachePolicy& policy) {
  if (!policy.dir.empty()) return policy.dir;
  if (const char* dir = std::getenv("EBB_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/ebb/optimized-models";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/ebb/optimized-models";
  return "";
}

Result<std::unique_ptr<OptimizedModelCache>> OptimizedModelCache::Open(const std::string& folder,
                                                                       uint64_t max_bytes) {
  if (folder.empty()) return FailedPrecondition("no cache folder (set optimized_model_cache.dir or EBB_CACHE_DIR)");
  if (CpuFeaturesHash().empty()) return FailedPrecondition("the CPU's feature flags cannot be read");
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    fs::create_directories(folder, ec);
    if (ec) return FailedPrecondition("cannot create the cache folder '" + folder + "': " + ec.message());
    fs::permissions(folder, fs::perms::owner_all, fs::perm_options::replace, ec);
  }
  if (access(folder.c_str(), R_OK | W_OK | X_OK) != 0) {
    return FailedPrecondition("the cache folder '" + folder + "' is not writable");
  }
  return std::unique_ptr<OptimizedModelCache>(new OptimizedModelCache(folder, max_bytes));
}

std::string OptimizedModelCache::PathOf(const std::string& id, const char* extension) const {
  return folder_ + "/" + id + extension;
}

std::shared_ptr<MappedFile> OptimizedModelCache::Find(const OptimizedModelKey& key, std::string* why) {
  const std::string id = key.Id();
  std::string problem;
  auto bad = [&](const std::string& what) -> std::shared_ptr<MappedFile> {
    if (why) *why = what;
    Remove(key);
    return nullptr;
  };
  if (why) why->clear();
  const std::string header_text = ReadSmallFile(PathOf(id, ".json"));
  if (header_text.empty()) {
    std::error_code ec;
    if (fs::exists(PathOf(id, ".ort"), ec)) return bad("entry without its header");
    return nullptr;  // a plain miss
  }
  json header = json::parse(header_text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return bad("unreadable header");
  json expected = HeaderOf(key);
  for (const auto& [name, value] : expected.items()) {
    if (!header.contains(name) || header[name] != value) return bad("entry made for another key (" + name + ")");
  }
  if (!header.contains("bytes") || !header["bytes"].is_number_unsigned() || !header.contains("xxh3_64") ||
      !header["xxh3_64"].is_string()) {
    return bad("header without size or checksum");
  }
  auto mapped = MappedFile::Open(PathOf(id, ".ort"));
  if (!mapped.ok()) return bad("cannot map the entry: " + mapped.status().message());
  if ((*mapped)->size() != header["bytes"].get<uint64_t>()) return bad("truncated or extended entry");
  if (Hex64(XXH3_64bits((*mapped)->data(), (*mapped)->size())) != header["xxh3_64"].get<std::string>()) {
    return bad("corrupt entry (checksum mismatch)");
  }
  // Last use, for the least-recently-used trim.
  utimensat(AT_FDCWD, PathOf(id, ".json").c_str(), nullptr, 0);
  return std::move(mapped).value();
}

std::string OptimizedModelCache::TemporaryPath(const OptimizedModelKey& key) {
  static std::atomic<uint64_t> counter{0};
  return PathOf(key.Id(), ".ort") + ".tmp." + std::to_string(getpid()) + "." + std::to_string(++counter);
}

Status OptimizedModelCache::Commit(const OptimizedModelKey& key, const std::string& temporary) {
  std::error_code ec;
  auto mapped = MappedFile::Open(temporary);
  if (!mapped.ok()) {
    fs::remove(temporary, ec);
    return Internal("the optimized model was not written: " + mapped.status().message());
  }
  const uint64_t bytes = (*mapped)->size();
  if (bytes > max_bytes_) {
    fs::remove(temporary, ec);
    return ResourceExhausted("the optimized model (" + std::to_string(bytes) +
                             " bytes) is larger than the cache's bound of " + std::to_string(max_bytes_) + " bytes");
  }
  json header = HeaderOf(key);
  header["bytes"] = bytes;
  header["xxh3_64"] = Hex64(XXH3_64bits((*mapped)->data(), bytes));
  mapped->reset();
  const std::string id = key.Id();
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
    if (e.is_regular_file(ec)) total += e.file_size(ec);
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
    if (!e.is_regular_file(ec)) continue;
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
