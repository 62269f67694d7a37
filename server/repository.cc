#include "repository.h"

#include <algorithm>
#include <filesystem>

namespace ebb::server {
namespace fs = std::filesystem;

const char* ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kUnavailable: return "UNAVAILABLE";
    case ModelState::kLoading: return "LOADING";
    case ModelState::kReady: return "READY";
  }
  return "UNKNOWN";
}

namespace {

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

}  // namespace

Result<std::unique_ptr<ModelRepository>> ModelRepository::Open(Runtime& runtime, Options options) {
  std::error_code ec;
  if (!fs::is_directory(options.root, ec)) return NotFound("model repository '" + options.root + "' is not a folder");
  options.root = fs::canonical(options.root, ec).string();
  return std::unique_ptr<ModelRepository>(new ModelRepository(runtime, std::move(options)));
}

Result<std::string> ModelRepository::FolderOf(const std::string& name) const {
  if (!ValidName(name)) {
    return InvalidArgument("invalid model name '" + name + "' (letters, digits, '.', '_', '-'; not starting with '.')");
  }
  std::error_code ec;
  const fs::path folder = fs::path(options_.root) / name;
  if (!fs::is_regular_file(folder / "model.onnx", ec)) return NotFound("unknown model '" + name + "'");
  const fs::path real = fs::canonical(folder, ec);
  if (ec || real.parent_path() != fs::path(options_.root)) {
    return InvalidArgument("model '" + name + "' resolves outside the repository");
  }
  return real.string();
}

std::vector<ModelInfo> ModelRepository::Index() const {
  std::vector<ModelInfo> models;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!FolderOf(name).ok()) continue;
    if (auto info = Info(name); info.ok()) models.push_back(*info);
  }
  std::sort(models.begin(), models.end(), [](const ModelInfo& a, const ModelInfo& b) { return a.name < b.name; });
  return models;
}

Result<ModelInfo> ModelRepository::Info(const std::string& name) const {
  if (auto folder = FolderOf(name); !folder.ok()) return folder.status();
  std::lock_guard<std::mutex> lock(mu_);
  ModelInfo info{name, ModelState::kUnavailable, "", 0};
  if (auto it = slots_.find(name); it != slots_.end()) {
    info.state = it->second.state;
    info.reason = it->second.reason;
    info.loads = it->second.loads;
  }
  return info;
}

Status ModelRepository::LoadLocked(const std::string& name, std::unique_lock<std::mutex>& lock) {
  Slot& slot = slots_[name];
  while (slot.state == ModelState::kLoading) loaded_.wait(lock);
  slot.state = ModelState::kLoading;
  lock.unlock();

  Result<ModelHandle> loaded = [&]() -> Result<ModelHandle> {
    auto folder = FolderOf(name);
    if (!folder.ok()) return folder.status();
    auto config = LoadModelConfig(*folder);
    if (!config.ok()) return config.status();
    auto device = DeviceRequest::Parse(config->device);
    if (!device.ok()) return Status(device.status().code(), name + "/config.json: " + device.status().message());
    auto session = runtime_.Load(*folder + "/model.onnx", {.device = *device, .name = name});
    if (!session.ok()) return session.status();
    return ModelHandle{name, *session, *config};
  }();

  lock.lock();
  Slot& s = slots_[name];
  if (loaded.ok()) {
    s.state = ModelState::kReady;
    s.session = loaded->session;
    s.config = loaded->config;
    s.reason.clear();
    ++s.loads;
  } else {
    s.state = ModelState::kUnavailable;
    s.session.reset();
    s.reason = loaded.status().message();
  }
  loaded_.notify_all();
  if (!loaded.ok()) return loaded.status();
  if (options_.on_load) {
    lock.unlock();
    options_.on_load(name);
    lock.lock();
  }
  return Status::Ok();
}

Status ModelRepository::Load(const std::string& name) {
  if (auto folder = FolderOf(name); !folder.ok()) return folder.status();
  std::unique_lock<std::mutex> lock(mu_);
  // An explicit load re-reads config.json and the model file (a changed file
  // is a new cache key; the same bytes give the same cached session).
  return LoadLocked(name, lock);
}

Status ModelRepository::Unload(const std::string& name) {
  if (auto folder = FolderOf(name); !folder.ok()) return folder.status();
  std::shared_ptr<Session> session;
  {
    std::unique_lock<std::mutex> lock(mu_);
    Slot& slot = slots_[name];
    while (slot.state == ModelState::kLoading) loaded_.wait(lock);
    session = std::move(slot.session);
    slot.state = ModelState::kUnavailable;
    slot.reason = "unloaded";
  }
  if (session) {
    runtime_.Unload(*session);  // out of the cache: the next load builds it again
    if (options_.on_unload) options_.on_unload(name);
  }
  return Status::Ok();
}

std::vector<std::pair<std::string, Status>> ModelRepository::LoadAll() {
  std::vector<std::pair<std::string, Status>> failures;
  for (const ModelInfo& m : Index()) {
    if (Status st = Load(m.name); !st.ok()) failures.emplace_back(m.name, st);
  }
  return failures;
}

Result<ModelHandle> ModelRepository::Acquire(const std::string& name) {
  {
    // Fast path: a READY model was confined to the repository when it loaded.
    std::lock_guard<std::mutex> lock(mu_);
    auto it = slots_.find(name);
    if (it != slots_.end() && it->second.state == ModelState::kReady) {
      return ModelHandle{name, it->second.session, it->second.config};
    }
  }
  if (auto folder = FolderOf(name); !folder.ok()) return folder.status();
  std::unique_lock<std::mutex> lock(mu_);
  Slot* slot = &slots_[name];
  while (slot->state == ModelState::kLoading) loaded_.wait(lock);
  if (slot->state != ModelState::kReady) {
    if (!options_.load_on_demand) {
      return Unavailable("model '" + name + "' is not loaded" + (slot->reason.empty() ? "" : ": " + slot->reason));
    }
    if (Status st = LoadLocked(name, lock); !st.ok()) {
      return Unavailable("model '" + name + "' failed to load: " + st.message());
    }
    slot = &slots_[name];
  }
  return ModelHandle{name, slot->session, slot->config};
}

void ModelRepository::ReportExhausted(const std::string& name, const Session* session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(name);
  if (it == slots_.end() || it->second.session.get() != session) return;
  it->second.session.reset();
  it->second.state = ModelState::kUnavailable;
  it->second.reason = "dropped after running out of memory";
}

}  // namespace ebb::server
