#include "repository.h"

#include <algorithm>
#include <filesystem>

namespace ebb::server {
namespace fs = std::filesystem;

namespace {

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
  });
}

}  // namespace

ModelRepository::ModelRepository(Runtime& runtime, Options options)
    : options_(std::move(options)), pool_(std::make_unique<ModelPool>(runtime, options_.pool, options_.on_event)) {}

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

Result<ModelConfig> ModelRepository::Register(const std::string& name, bool reread) {
  if (!reread) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = configs_.find(name); it != configs_.end()) return it->second;
  }
  auto folder = FolderOf(name);
  if (!folder.ok()) return folder.status();
  auto config = LoadModelConfig(*folder);
  auto device = config.ok() ? DeviceRequest::Parse(config->device.empty() ? options_.default_device : config->device)
                            : Result<DeviceRequest>(config.status());
  std::lock_guard<std::mutex> lock(mu_);
  if (!device.ok()) {
    bad_configs_[name] = device.status().message();
    return Status(device.status().code(), name + "/config.json: " + device.status().message());
  }
  bad_configs_.erase(name);
  pool_->Add({name, *folder + "/model.onnx", {.device = *device}, config->pinned, config->keep_alive_ms});
  configs_[name] = *config;
  return config;
}

std::vector<ModelInfo> ModelRepository::Index() {
  std::vector<ModelInfo> models;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.root, ec)) {
    if (auto info = Info(entry.path().filename().string()); info.ok()) models.push_back(*info);
  }
  std::sort(models.begin(), models.end(), [](const ModelInfo& a, const ModelInfo& b) { return a.name < b.name; });
  return models;
}

Result<ModelInfo> ModelRepository::Info(const std::string& name) {
  if (auto config = Register(name, /*reread=*/false); !config.ok()) {
    if (config.status().code() == StatusCode::kNotFound || config.status().code() == StatusCode::kInvalidArgument) {
      if (!FolderOf(name).ok()) return config.status();
    }
    return ModelInfo{name, PoolState::kUnloaded, config.status().message()};
  }
  auto status = pool_->StatusOf(name);
  if (!status.ok()) return status.status();
  return ModelInfo{name,       status->state,  status->reason, status->charge_bytes, status->in_flight,
                   status->pinned, status->loads};
}

Status ModelRepository::LoadFailure(const std::string& name, const Status& status) const {
  if (status.code() == StatusCode::kResourceExhausted || status.code() == StatusCode::kNotFound) return status;
  return Unavailable("model '" + name + "' failed to load: " + status.message());
}

Status ModelRepository::Load(const std::string& name) {
  if (auto config = Register(name, /*reread=*/true); !config.ok()) return config.status();
  return pool_->Load(name);
}

Status ModelRepository::Unload(const std::string& name) {
  if (auto config = Register(name, /*reread=*/false); !config.ok()) return config.status();
  return pool_->Unload(name);
}

std::vector<std::pair<std::string, Status>> ModelRepository::LoadAll() {
  std::vector<std::pair<std::string, Status>> failures;
  for (const ModelInfo& m : Index()) {
    if (Status st = Load(m.name); !st.ok()) failures.emplace_back(m.name, st);
  }
  return failures;
}

Result<ModelHandle> ModelRepository::Acquire(const std::string& name, std::optional<int64_t> keep_alive_ms) {
  auto config = Register(name, /*reread=*/false);
  if (!config.ok()) return config.status();
  auto lease = pool_->Acquire(name, {.keep_alive_ms = keep_alive_ms, .load_on_demand = options_.load_on_demand});
  if (!lease.ok()) return LoadFailure(name, lease.status());
  return ModelHandle{name, *config, std::move(lease).value()};
}

Status ModelRepository::RunWithRecovery(
    const std::string& name, std::optional<int64_t> keep_alive_ms,
    const std::function<Status(const ModelConfig&, const std::shared_ptr<Session>&)>& body) {
  auto config = Register(name, /*reread=*/false);
  if (!config.ok()) return config.status();
  bool ran = false;
  Status st = pool_->RunWithRecovery(
      name, {.keep_alive_ms = keep_alive_ms, .load_on_demand = options_.load_on_demand},
      [&](const std::shared_ptr<Session>& session) {
        ran = true;
        return body(*config, session);
      });
  return ran ? st : LoadFailure(name, st);
}

}  // namespace ebb::server
