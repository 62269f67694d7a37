#include "modelmesh.h"

#include <algorithm>
#include <cmath>

#include "ebb/memory_stats.h"
#include "ebb/model_signature.h"
#include "ebb/version.h"

namespace ebb::server {
namespace {

// What a load must leave unchanged for the process's RSS growth over it to be its own.
struct PoolActivity {
  uint64_t loads = 0;  // loads so far, all models
  int ready = 0;       // models loaded now (an eviction meanwhile gives memory back)
  int in_flight = 0;   // runs in flight now, all models
  bool operator==(const PoolActivity&) const = default;
};

PoolActivity ActivityOf(const ModelPool& pool) {
  PoolActivity a;
  for (const ModelStatus& m : pool.Snapshot()) {
    a.loads += m.loads;
    a.ready += m.state == PoolState::kReady ? 1 : 0;
    a.in_flight += m.in_flight;
  }
  return a;
}

}  // namespace

ModelMeshRuntime::ModelMeshRuntime(InferenceService& core, ModelMeshOptions options)
    : core_(core), options_(std::move(options)) {}

ModelMeshStatus ModelMeshRuntime::RuntimeStatus() {
  ModelRepository& repository = core_.repository();
  for (const std::string& id : repository.Attached()) (void)Forget(id);
  for (const ModelStatus& m : repository.pool().Snapshot()) {
    if (m.state != PoolState::kUnloaded) (void)repository.pool().Unload(m.name);  // repository folders' models
  }
  return {repository.pool().budget("cpu"), 1, options_.model_loading_timeout_ms, options_.default_model_size_bytes,
          Version()};
}

Result<int64_t> ModelMeshRuntime::LoadModel(const ModelMeshLoad& request, const std::function<bool()>& cancelled) {
  auto file = ResolveModelFile(options_.model_root, request.model_path);
  if (!file.ok()) return file.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++loading_[request.model_id];
  }
  ModelRepository& repository = core_.repository();
  ModelPool& pool = repository.pool();
  const PoolActivity activity_before = ActivityOf(pool);
  const int64_t rss_before = ReadRssBytes();
  Status status = cancelled() ? Cancelled("loadModel of '" + request.model_id + "' was cancelled before it started")
                              : repository.Attach(request.model_id, *file);
  const bool attached = status.ok();
  // The load makes room for the latest outside memory measured, the best guess before this one.
  // An attached model's pool name is its id.
  const int64_t guess = OutsideBytes(std::nullopt);
  if (status.ok()) status = pool.SetOutsideBytes(request.model_id, guess);
  if (status.ok()) status = core_.Load(request.model_id);
  if (status.ok() && cancelled()) {
    status = Cancelled("loadModel of '" + request.model_id + "' was cancelled; the model is unloaded again");
  }
  Result<ModelInfo> info = status.ok() ? repository.Info(request.model_id) : Result<ModelInfo>(status);
  if (info.ok()) {
    // Its own when this was the only load, nothing was evicted, and no run was in flight at either end.
    PoolActivity expected = activity_before;
    ++expected.loads;
    ++expected.ready;
    const bool own = expected == ActivityOf(pool) && activity_before.in_flight == 0;
    const int64_t pool_part = info->charge_bytes - guess;
    const int64_t outside = OutsideBytes(own ? std::optional<int64_t>(ReadRssBytes() - rss_before - pool_part)
                                             : std::nullopt);
    Status set = pool.SetOutsideBytes(request.model_id, outside);
    info = set.ok() ? repository.Info(request.model_id) : Result<ModelInfo>(set);
  }
  if (!info.ok() && attached) (void)core_.Forget(request.model_id);  // nothing stays behind a failed load
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--loading_[request.model_id] == 0) loading_.erase(request.model_id);
  }
  loads_done_.notify_all();
  if (!info.ok()) return info.status();
  return info->charge_bytes;
}

int64_t ModelMeshRuntime::OutsideBytes(std::optional<int64_t> measured) {
  std::lock_guard<std::mutex> lock(mu_);
  if (measured) last_outside_ = std::clamp<int64_t>(*measured, 0, kMaxOutsideBytes);
  return last_outside_;
}

Status ModelMeshRuntime::Forget(const std::string& model_id) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    loads_done_.wait(lock, [&] { return loading_.count(model_id) == 0; });
  }
  return core_.Forget(model_id);
}

Status ModelMeshRuntime::UnloadModel(const std::string& model_id) {
  ModelRepository& repository = core_.repository();
  if (!repository.IsAttached(model_id)) {
    // Not attached: nothing to do, unless a load of it is in progress (Forget waits for it).
    std::lock_guard<std::mutex> lock(mu_);
    if (loading_.count(model_id) == 0) return Status::Ok();
  }
  return Forget(model_id);
}

Result<int64_t> ModelMeshRuntime::PredictModelSize(const ModelMeshLoad& request) const {
  auto file = ResolveModelFile(options_.model_root, request.model_path);
  if (!file.ok()) return file.status();
  // Every file the model reads: model.onnx and its external-data files (each confined to the
  // model's folder, which is inside the root).
  Result<ModelFiles> files = ReadModelFiles(file->path);
  if (!files.ok()) return files.status();
  const auto bytes = static_cast<double>(files->total_bytes);
  return static_cast<int64_t>(std::ceil(bytes * kPredictFactor)) + kPredictBaseBytes;
}

Result<int64_t> ModelMeshRuntime::ModelSize(const std::string& model_id) {
  if (!core_.repository().IsAttached(model_id)) return NotFound("model '" + model_id + "' is not loaded");
  auto info = core_.repository().Info(model_id);
  if (!info.ok()) return info.status();
  return info->charge_bytes;
}

}  // namespace ebb::server
