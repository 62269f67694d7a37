#include "repository.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "ebb/confined_path.h"
#include "ebb/model_location.h"
#include "ebb/ocr.h"

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

std::string Join(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& item : items) s += (s.empty() ? "" : ", ") + item;
  return s;
}

// `version` among the versions a model serves ("" = the highest), where it stands in them; null
// when it is not served.
const std::string* FindVersion(const std::vector<std::string>& versions, const std::string& version) {
  if (version.empty()) return versions.empty() ? nullptr : &versions.back();
  const auto it = std::find(versions.begin(), versions.end(), version);
  return it == versions.end() ? nullptr : &*it;
}

Status NoSuchVersion(const std::string& name, const std::vector<std::string>& versions, const std::string& version) {
  return NotFound("model '" + name + "' has no version '" + version + "' served; versions served: " + Join(versions));
}

// labels.txt beside a model, confined to `root` (LoadModelLabels), shared by every copy of its ModelFolder.
Result<std::shared_ptr<const std::vector<std::string>>> ReadLabels(const fs::path& folder, const std::string& root) {
  auto labels = LoadModelLabels(folder.string(), root);
  if (!labels.ok()) return labels.status();
  return std::make_shared<const std::vector<std::string>>(std::move(labels).value());
}

}  // namespace

// What a model folder holds. `folder` is its real path, inside the repository (FolderOf).
struct ModelRepository::Layout {
  bool flat_model = false;                // model.onnx directly in the folder
  std::vector<int64_t> versions;          // version folders with a model.onnx, ascending
  std::vector<std::string> empty_versions;  // version folders without one
  std::vector<std::string> linked_out;    // model files that are links leading out of the repository

  // `root`: the folder model files and version folders must resolve inside ("": links followed).
  static Layout Of(const fs::path& folder, const fs::path& root) {
    Layout layout;
    // A model file that resolves outside the root is listed as linked out, not served.
    auto served = [&](const ModelFolderFile& file, const std::string& shown) {
      if (!file.confined.ok()) layout.linked_out.push_back(shown);
      return file.confined.ok();
    };
    const ModelFolderLayout files = ReadModelFolder(folder.string(), root.string());
    layout.flat_model = files.model_onnx && served(*files.model_onnx, "model.onnx");
    // An OCR pipeline folder (ebb/ocr.h) holds no model.onnx: its detector's stands for it in the pool.
    if (!layout.flat_model && IsOcrFolder(folder.string())) {
      if (Result<OcrModelFiles> ocr = ReadOcrFolder(folder.string()); ocr.ok()) {
        const std::optional<ModelFolderFile> detector = ModelFileAt(ocr->detector, root.string());
        layout.flat_model = detector && served(*detector, "the detector's model.onnx");
      }
    }
    for (const ModelFolderLayout::Version& version : files.versions) {
      const std::string name = std::to_string(version.number);
      if (served(version.model_onnx, name + "/model.onnx")) {
        layout.versions.push_back(version.number);
      } else {
        layout.empty_versions.push_back(name);
      }
    }
    layout.empty_versions.insert(layout.empty_versions.end(), files.empty_versions.begin(), files.empty_versions.end());
    std::sort(layout.empty_versions.begin(), layout.empty_versions.end());
    return layout;
  }
  bool is_model() const { return flat_model || !versions.empty() || !empty_versions.empty() || !linked_out.empty(); }
};

ModelRepository::ModelRepository(Runtime& runtime, Options options)
    : options_(std::move(options)), pool_(std::make_unique<ModelPool>(runtime, options_.pool, options_.on_event)) {}

Result<std::unique_ptr<ModelRepository>> ModelRepository::Open(Runtime& runtime, Options options) {
  std::error_code ec;
  if (!fs::is_directory(options.root, ec)) return NotFound("model repository '" + options.root + "' is not a folder");
  Result<std::string> root = RealPath(options.root);
  if (!root.ok()) return NotFound("model repository '" + options.root + "' " + root.status().message());
  options.root = *root;
  return std::unique_ptr<ModelRepository>(new ModelRepository(runtime, std::move(options)));
}

std::string ModelRepository::ModelOfPoolName(const std::string& pool_name) {
  return pool_name.substr(0, pool_name.find('/'));
}

Result<std::string> ModelRepository::FolderOf(const std::string& name) const {
  if (!ValidName(name)) {
    return InvalidArgument("invalid model name '" + Clip(name) + "' (letters, digits, '.', '_', '-'; not starting with '.')");
  }
  std::error_code ec;
  const fs::path folder = fs::path(options_.root) / name;
  if (!fs::is_directory(folder, ec)) return NotFound("unknown model '" + name + "'");
  Result<std::string> real = options_.confine_links ? ResolveBelow(options_.root, name) : RealPath(folder.string());
  if (!real.ok()) return InvalidArgument("model '" + name + "' resolves outside the repository (--confine-links)");
  if (!Layout::Of(*real, ConfinedTo()).is_model()) return NotFound("unknown model '" + name + "'");
  return real;
}

std::string ModelRepository::ConfinedTo() const { return options_.confine_links ? options_.root : ""; }

std::string ModelRepository::PoolName(const ModelFolder& model, const std::string& version) const {
  return model.versioned ? model.name + "/" + version : model.name;
}

std::string ModelRepository::ModelPath(const ModelFolder& model, const std::string& version) const {
  if (!model.file.empty()) return model.file;
  const fs::path folder = fs::path(options_.root) / model.name;
  if (model.config->kind == ModelKind::kOcr) return (folder / model.config->ocr.detector / "model.onnx").lexically_normal().string();
  return ((model.versioned ? folder / version : folder) / "model.onnx").string();
}

// Reads a model folder: layout, configuration (`config`, else config.json),
// the versions it serves, labels. Touches nothing else.
Result<ModelFolder> ModelRepository::Read(const std::string& name, std::optional<ModelConfig> config) const {
  auto folder = FolderOf(name);
  if (!folder.ok()) return folder.status();
  const Layout layout = Layout::Of(*folder, ConfinedTo());
  if (!layout.linked_out.empty()) {
    return InvalidArgument("model '" + name + "': " + layout.linked_out[0] +
                           " is a link that resolves outside the repository (--confine-links)");
  }
  auto labels = ReadLabels(*folder, ConfinedTo());
  if (!labels.ok()) return labels.status();
  ModelFolder model{name, !layout.flat_model, {}, nullptr, config.has_value(), false, *labels};  // config: below
  if (layout.flat_model && !layout.versions.empty()) {
    return InvalidArgument("model '" + name + "' has both model.onnx and version folders with one; keep one layout");
  }
  if (!layout.flat_model && layout.versions.empty()) {
    return InvalidArgument("model '" + name + "': no version folder has a model.onnx (" + Join(layout.empty_versions) +
                           ")");
  }
  if (config) {
    model.config = std::make_shared<const ModelConfig>(*config);
  } else {
    auto read = LoadModelConfig(*folder, ConfinedTo());
    if (!read.ok()) return read.status();
    model.config = std::make_shared<const ModelConfig>(std::move(read).value());
    std::error_code ec;
    model.config_file = fs::exists(fs::path(*folder) / "config.json", ec);
  }
  const std::string& device = model.config->device.empty() ? options_.default_device : model.config->device;
  if (auto parsed = DeviceRequest::Parse(device); !parsed.ok()) {
    return Status(parsed.status().code(), name + "/config.json: " + parsed.status().message());
  }
  const ModelConfig& c = *model.config;
  if (!model.versioned) {
    if (c.all_versions || (!c.versions.empty() && c.versions != std::vector<int64_t>{1})) {
      return InvalidArgument("model '" + name + "': config.versions names versions, but the folder is flat " +
                             "(model.onnx is version 1; put versions in numbered folders)");
    }
    model.versions = {"1"};
    return model;
  }
  std::vector<int64_t> served;
  if (c.all_versions) {
    served = layout.versions;
  } else if (!c.versions.empty()) {
    for (int64_t v : std::set<int64_t>(c.versions.begin(), c.versions.end())) {
      if (!std::binary_search(layout.versions.begin(), layout.versions.end(), v)) {
        std::vector<std::string> present;
        for (int64_t p : layout.versions) present.push_back(std::to_string(p));
        return InvalidArgument("model '" + name + "': config.versions lists version " + std::to_string(v) +
                               ", which has no folder " + std::to_string(v) + "/model.onnx (versions present: " +
                               Join(present) + ")");
      }
      served.push_back(v);
    }
  } else {
    served = {layout.versions.back()};  // the default policy: the highest version
  }
  for (int64_t v : served) model.versions.push_back(std::to_string(v));
  return model;
}

Result<ModelFolder> ModelRepository::Register(const std::string& name, bool reread, std::optional<ModelConfig> config) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end() && !it->second.file.empty()) {  // attached: registered by Attach only
      if (config) {
        it->second.config = std::make_shared<const ModelConfig>(*config);
        it->second.config_from_request = true;
      }
      return it->second;
    }
    if (!reread && !config && it != models_.end()) return it->second;
  }
  if (!options_.scan) return NotFound("unknown model '" + name + "'");
  Result<ModelFolder> model = Read(name, std::move(config));
  std::vector<std::string> stale;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!model.ok()) {
      if (FolderOf(name).ok()) bad_configs_[name] = model.status().message();
      return model.status();
    }
    bad_configs_.erase(name);
    if (auto old = models_.find(name); old != models_.end()) {
      for (const std::string& v : old->second.versions) {
        const std::string old_name = PoolName(old->second, v);
        bool kept = false;
        for (const std::string& w : model->versions) kept |= PoolName(*model, w) == old_name;
        if (!kept) stale.push_back(old_name);
      }
    }
    const ModelConfig& c = *model->config;
    const auto device = DeviceRequest::Parse(c.device.empty() ? options_.default_device : c.device);
    for (const std::string& v : model->versions) {
      pool_->Add({PoolName(*model, v), ModelPath(*model, v), {.device = *device, .graph_optimization = c.graph_optimization},
                  c.pinned, c.keep_alive_ms});
    }
    models_[name] = *model;
  }
  for (const std::string& old_name : stale) (void)pool_->Unload(old_name);  // versions no longer served
  return model;
}

Result<ModelFolder> ModelRepository::Folder(const std::string& name) { return Register(name, /*reread=*/false); }

Result<std::string> ModelRepository::ResolveVersion(const std::string& name, const std::string& version) {
  Route route;
  EBB_RETURN_IF_ERROR(Resolve(name, version, &route));
  return std::move(route.version);
}

Status ModelRepository::RouteIn(const ModelFolder& model, const std::string& name, const std::string& version,
                                Route* route) const {
  const std::string* found = FindVersion(model.versions, version);
  if (found == nullptr) return NoSuchVersion(name, model.versions, version);
  route->name = name;
  route->version = *found;
  route->pool_name = PoolName(model, *found);
  route->config = model.config;
  return Status::Ok();
}

bool ModelRepository::ResolveRegistered(const std::string& name, const std::string& version, Route* route,
                                        Status* status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!found_ || found_->first != name) {
    const auto it = models_.find(name);
    if (it == models_.end()) return false;
    found_ = &*it;
  }
  *status = RouteIn(found_->second, name, version, route);
  return true;
}

Status ModelRepository::Resolve(const std::string& name, const std::string& version, Route* route) {
  Status status;
  if (ResolveRegistered(name, version, route, &status)) return status;
  auto model = Register(name, /*reread=*/false);
  if (!model.ok()) return model.status();
  return RouteIn(*model, name, version, route);
}

bool ModelRepository::PlacedNow(const std::string& name, const std::string& version, Route* route) {
  Status status;
  if (!ResolveRegistered(name, version, route, &status) || !status.ok()) return false;
  return pool_->IsReady(route->pool_name);
}

std::vector<ModelInfo> ModelRepository::Index() {
  std::set<std::string> found;
  std::error_code ec;
  if (options_.scan) {
    for (const auto& entry : fs::directory_iterator(options_.root, ec)) found.insert(entry.path().filename().string());
  }
  for (const std::string& name : Attached()) found.insert(name);
  const std::vector<std::string> names(found.begin(), found.end());
  std::vector<ModelInfo> models;
  for (const std::string& name : names) {
    auto model = Register(name, /*reread=*/false);
    if (!model.ok()) {
      if (options_.scan && FolderOf(name).ok()) models.push_back({name, "", PoolState::kUnloaded, model.status().message()});
      continue;
    }
    for (const std::string& v : model->versions) {
      if (auto info = Info(name, v); info.ok()) models.push_back(*info);
    }
  }
  return models;
}

Result<ModelInfo> ModelRepository::Info(const std::string& name, const std::string& version) {
  auto model = Register(name, /*reread=*/false);
  if (!model.ok()) {
    if (!options_.scan || !FolderOf(name).ok()) return model.status();
    return ModelInfo{name, "", PoolState::kUnloaded, model.status().message()};
  }
  auto resolved = ResolveVersion(name, version);
  if (!resolved.ok()) return resolved.status();
  auto status = pool_->StatusOf(PoolName(*model, *resolved));
  if (!status.ok()) return status.status();
  ModelInfo info{name,           *resolved,          status->state,     status->reason, status->charge_bytes,
                 status->transient_bytes, status->in_flight, status->pinned, status->loads};
  info.need_points = status->need_points;
  info.arena_need_points = status->arena_need_points;
  info.last_need_bytes = status->last_need_bytes;
  info.last_arena_need_bytes = status->last_arena_need_bytes;
  info.reserved_bytes = status->reserved_bytes;
  info.waiting_for_memory = status->waiting_for_memory;
  info.out_of_memory = status->out_of_memory;
  return info;
}

std::vector<FolderProblem> ModelRepository::Problems() {
  std::vector<FolderProblem> problems;
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  if (!options_.scan) return problems;
  for (const auto& entry : fs::directory_iterator(options_.root, ec)) {
    if (!IsAttached(entry.path().filename().string())) entries.push_back(entry);
  }
  std::sort(entries.begin(), entries.end());
  for (const auto& entry : entries) {
    if (!entry.is_directory(ec)) continue;
    const std::string name = entry.path().filename().string();
    Result<std::string> folder = FolderOf(name);
    if (!folder.ok()) {
      const bool not_a_model = folder.status().code() == StatusCode::kNotFound;
      problems.push_back({name, not_a_model ? "no model.onnx and no version folder (1/model.onnx, ...)"
                                            : folder.status().message()});
      continue;
    }
    if (auto model = Register(name, /*reread=*/false); !model.ok()) {
      problems.push_back({name, model.status().message()});
      continue;
    }
    for (const std::string& v : Layout::Of(*folder, ConfinedTo()).empty_versions) {
      problems.push_back({name + "/" + v, "version folder without a model.onnx (or outside the model folder)"});
    }
  }
  return problems;
}

Result<ModelSignature> ModelRepository::Signature(const std::string& name, const std::string& version) {
  auto model = Register(name, /*reread=*/false);
  if (!model.ok()) return model.status();
  auto resolved = ResolveVersion(name, version);
  if (!resolved.ok()) return resolved.status();
  auto from_pool = pool_->SignatureOf(PoolName(*model, *resolved));
  if (from_pool.ok()) return from_pool;
  return ReadModelSignature(ModelPath(*model, *resolved));
}

Status ModelRepository::LoadFailure(const std::string& name, const Status& status) const {
  if (status.code() == StatusCode::kResourceExhausted || status.code() == StatusCode::kNotFound) return status;
  return Unavailable("model '" + name + "' failed to load: " + status.message());
}

Status ModelRepository::Load(const std::string& name, std::optional<ModelConfig> config) {
  auto model = Register(name, /*reread=*/true, std::move(config));
  if (!model.ok()) return model.status();
  for (const std::string& v : model->versions) {
    if (Status st = pool_->Load(PoolName(*model, v)); !st.ok()) {
      return LoadFailure(model->versioned ? name + "' version '" + v : name, st);
    }
  }
  return Status::Ok();
}

Status ModelRepository::Unload(const std::string& name) {
  auto model = Register(name, /*reread=*/false);
  if (!model.ok()) return model.status();
  for (const std::string& v : model->versions) EBB_RETURN_IF_ERROR(pool_->Unload(PoolName(*model, v)));
  return Status::Ok();
}

Status ModelRepository::Attach(const std::string& name, const ModelFile& file, bool pinned) {
  if (!ValidName(name)) {
    return InvalidArgument("invalid model name '" + Clip(name) + "' (letters, digits, '.', '_', '-'; not starting with '.')");
  }
  const fs::path folder = fs::path(file.path).parent_path();
  const std::string root = file.root.empty() ? folder.string() : file.root;
  auto config = LoadModelConfig(folder.string(), root);
  if (!config.ok()) return InvalidArgument(config.status().message());
  auto labels = ReadLabels(folder, root);
  if (!labels.ok()) return InvalidArgument(labels.status().message());
  const auto device = DeviceRequest::Parse(config->device.empty() ? options_.default_device : config->device);
  if (!device.ok()) return InvalidArgument(folder.string() + "/config.json: " + device.status().message());
  bool replaced = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto old = models_.find(name);
    replaced = old != models_.end() && (old->second.file.empty() || old->second.file != file.path);
  }
  if (replaced) (void)pool_->Unload(name);  // another file (or a folder model) under this name
  std::error_code ec;
  const bool config_file = fs::exists(folder / "config.json", ec);
  ModelFolder model{name, false, {file.version}, std::make_shared<const ModelConfig>(*config), false, config_file,
                    *labels, file.path};
  std::lock_guard<std::mutex> lock(mu_);
  pool_->Add({name, file.path, {.device = *device, .graph_optimization = config->graph_optimization},
              pinned || config->pinned, config->keep_alive_ms});
  bad_configs_.erase(name);
  models_[name] = std::move(model);
  return Status::Ok();
}

Status ModelRepository::Detach(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end() || it->second.file.empty()) return Status::Ok();
    if (found_ == &*it) found_ = nullptr;
    models_.erase(it);
  }
  return pool_->Remove(name);
}

std::vector<std::string> ModelRepository::Attached() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, model] : models_) {
    if (!model.file.empty()) names.push_back(name);
  }
  return names;
}

bool ModelRepository::IsAttached(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  return it != models_.end() && !it->second.file.empty();
}

std::vector<std::pair<std::string, Status>> ModelRepository::LoadAll() {
  std::vector<std::pair<std::string, Status>> failures;
  std::set<std::string> names;
  for (const ModelInfo& m : Index()) names.insert(m.name);
  for (const std::string& name : names) {
    if (Status st = Load(name); !st.ok()) failures.emplace_back(name, st);
  }
  return failures;
}

Result<ModelHandle> ModelRepository::Acquire(const std::string& name, const std::string& version,
                                             std::optional<int64_t> keep_alive_ms) {
  auto model = Register(name, /*reread=*/false);
  if (!model.ok()) return model.status();
  auto resolved = ResolveVersion(name, version);
  if (!resolved.ok()) return resolved.status();
  auto lease = pool_->Acquire(PoolName(*model, *resolved),
                              {.keep_alive_ms = keep_alive_ms, .load_on_demand = options_.load_on_demand});
  if (!lease.ok()) return LoadFailure(name, lease.status());
  return ModelHandle{name, *resolved, *model->config, std::move(lease).value()};
}

Status ModelRepository::RunWithRecovery(const std::string& name, const std::string& version, AcquireOptions options,
                                        const RunBody& body) {
  Route route;
  EBB_RETURN_IF_ERROR(Resolve(name, version, &route));
  return RunWithRecovery(route, std::move(options), body);
}

Status ModelRepository::RunWithRecovery(const Route& route, AcquireOptions options, const RunBody& body) {
  options.load_on_demand = options_.load_on_demand;
  // Behind one reference: a std::function holds a functor of two pointers without an allocation.
  struct Run {
    const RunBody& body;
    const ModelConfig& config;
    bool ran = false;
  } run{body, *route.config};
  Status st = pool_->RunWithRecovery(route.pool_name, options, [&run](const std::shared_ptr<Session>& session) {
    run.ran = true;
    return run.body(run.config, session);
  });
  if (run.ran || st.code() == StatusCode::kCancelled) return st;
  // A run refused or timed out while waiting for memory found its model loaded: not a load failure.
  if (auto status = pool_->StatusOf(route.pool_name); status.ok() && status->state == PoolState::kReady) return st;
  return LoadFailure(route.name, st);
}

}  // namespace ebb::server
