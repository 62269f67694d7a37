// server/core/repository.h — the model repository behind `ebb serve`.
//
// A repository is a folder with one sub-folder per model, each holding
// `model.onnx` and an optional `config.json` (ebb/model_config.h). Model
// names are confined to the repository: a name is a single path component of
// [A-Za-z0-9._-] not starting with '.', and its folder must resolve inside the
// repository root (no symlink escapes). No request can name a path outside it.
//
// Loading, the memory budget, eviction and keep-alive are the ModelPool's
// (ebb/model_pool.h): the repository registers each model folder found with
// the pool (re-reading config.json on an explicit load) and hands requests a
// ModelHandle that holds the model for the request's duration, so unloading
// or evicting never destroys a session under a running request.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ebb/model_config.h"
#include "ebb/model_pool.h"
#include "ebb/runtime.h"

namespace ebb::server {

struct ModelInfo {
  std::string name;
  PoolState state = PoolState::kUnloaded;
  std::string reason;        // why it is not ready, when known
  int64_t charge_bytes = 0;  // the pool's measured charge
  int in_flight = 0;
  bool pinned = false;
  uint64_t loads = 0;
};

// What a request holds while it runs.
struct ModelHandle {
  std::string name;
  ModelConfig config;
  Lease lease;  // keeps the model loaded
  const std::shared_ptr<Session>& session() const { return lease.session(); }
};

class ModelRepository {
 public:
  struct Options {
    std::string root;            // the repository folder
    bool load_on_demand = true;  // a request to a model not loaded loads it
    std::string default_device = "auto";  // for models whose config.json names none
    PoolOptions pool;            // memory budget, waiting, default keep-alive
    ModelPool::EventFn on_event; // loads and evictions, for metrics
  };

  // Errors: kNotFound when `root` is not a folder.
  static Result<std::unique_ptr<ModelRepository>> Open(Runtime& runtime, Options options);

  // Every model folder under the root (scanned now) with its state.
  std::vector<ModelInfo> Index();
  // Info on one model. Errors: kInvalidArgument (bad name), kNotFound.
  Result<ModelInfo> Info(const std::string& name);

  // Loads a model, re-reading its config.json. Errors: kInvalidArgument (bad
  // name, broken model or config), kNotFound, kUnavailable, kResourceExhausted.
  Status Load(const std::string& name);
  // Unloads a model; its session goes when the last request using it ends.
  Status Unload(const std::string& name);
  // Loads every model; returns the failures (the others load).
  std::vector<std::pair<std::string, Status>> LoadAll();

  // A ready model for a request (loaded on demand when allowed).
  // Errors: kNotFound, kInvalidArgument, kUnavailable (not loaded, or its load
  // failed), kResourceExhausted (does not fit the memory budget).
  Result<ModelHandle> Acquire(const std::string& name, std::optional<int64_t> keep_alive_ms = std::nullopt);
  // Runs `body` on the model with the pool's out-of-memory recovery: on
  // kResourceExhausted, idle models are evicted, arenas trimmed, and `body`
  // runs once more on a fresh load.
  Status RunWithRecovery(const std::string& name, std::optional<int64_t> keep_alive_ms,
                         const std::function<Status(const ModelConfig&, const std::shared_ptr<Session>&)>& body);

  const std::string& root() const { return options_.root; }
  ModelPool& pool() { return *pool_; }

 private:
  ModelRepository(Runtime& runtime, Options options);
  // The model's folder, confined to the root. Errors: kInvalidArgument, kNotFound.
  Result<std::string> FolderOf(const std::string& name) const;
  // Reads config.json and registers the model with the pool (once, or again when `reread`).
  Result<ModelConfig> Register(const std::string& name, bool reread);
  Status LoadFailure(const std::string& name, const Status& status) const;

  const Options options_;
  std::unique_ptr<ModelPool> pool_;
  mutable std::mutex mu_;
  std::map<std::string, ModelConfig> configs_;      // registered models; guarded by mu_
  std::map<std::string, std::string> bad_configs_;  // config errors; guarded by mu_
};

}  // namespace ebb::server
