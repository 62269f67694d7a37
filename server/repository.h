// server/repository.h — the model repository behind `ebb serve`.
//
// A repository is a folder with one sub-folder per model, each holding
// `model.onnx` and an optional `config.json` (ebb/model_config.h). Model
// names are confined to the repository: a name is a single path component of
// [A-Za-z0-9._-] not starting with '.', and its folder must resolve inside the
// repository root (no symlink escapes). No request can name a path outside it.
//
// Each model moves through these states:
//
//   UNAVAILABLE --Load/Acquire--> LOADING --ok--> READY --Unload--> UNAVAILABLE
//                                   |                 \--out of memory--> UNAVAILABLE
//                                   \--error--> UNAVAILABLE (reason kept)
//
// A READY model holds its session; requests take a ModelHandle (a shared
// reference), so unloading never destroys a session under a running request.
// Loads go through the Runtime's session cache (same bytes, same session).
//
// Thread safety: all methods may be called concurrently. Loads of different
// models run in parallel; concurrent requests for one loading model wait for
// that load.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ebb/model_config.h"
#include "ebb/runtime.h"

namespace ebb::server {

enum class ModelState { kUnavailable, kLoading, kReady };
// "UNAVAILABLE", "LOADING", "READY" (the KServe repository extension's words).
const char* ModelStateName(ModelState state);

struct ModelInfo {
  std::string name;
  ModelState state = ModelState::kUnavailable;
  std::string reason;  // why it is not ready (last load error), if known
  uint64_t loads = 0;  // successful loads of this model so far
};

// What a request holds while it runs.
struct ModelHandle {
  std::string name;
  std::shared_ptr<Session> session;
  ModelConfig config;
};

class ModelRepository {
 public:
  struct Options {
    std::string root;             // the repository folder
    bool load_on_demand = true;   // Acquire loads a model that is not loaded
    // Called after every successful load / unload (for metrics), outside locks.
    std::function<void(const std::string& name)> on_load;
    std::function<void(const std::string& name)> on_unload;
  };

  // Errors: kNotFound when `root` is not a folder.
  static Result<std::unique_ptr<ModelRepository>> Open(Runtime& runtime, Options options);

  // Every model folder under the root (scanned now) with its state.
  std::vector<ModelInfo> Index() const;
  // Info on one model. Errors: kInvalidArgument (bad name), kNotFound.
  Result<ModelInfo> Info(const std::string& name) const;

  // Loads (or reloads the config of) a model. Errors: kInvalidArgument (bad
  // name or broken model/config), kNotFound, kUnavailable, kResourceExhausted.
  Status Load(const std::string& name);
  // Unloads a model; its session goes when the last request using it ends.
  Status Unload(const std::string& name);
  // Loads every model in the repository; returns the failures (the others load).
  std::vector<std::pair<std::string, Status>> LoadAll();

  // A READY model for a request, loading it on demand when allowed.
  // Errors: kNotFound, kInvalidArgument (bad name), kUnavailable (not loaded
  // and on-demand loading is off, or its load failed).
  Result<ModelHandle> Acquire(const std::string& name);
  // A run of `session` ran out of memory: the model is dropped (UNAVAILABLE)
  // so the next request loads it afresh. Ignored when it was reloaded since.
  void ReportExhausted(const std::string& name, const Session* session);

  const std::string& root() const { return options_.root; }

 private:
  struct Slot {
    ModelState state = ModelState::kUnavailable;
    std::shared_ptr<Session> session;
    ModelConfig config;
    std::string reason;
    uint64_t loads = 0;
  };

  ModelRepository(Runtime& runtime, Options options) : runtime_(runtime), options_(std::move(options)) {}
  // The model's folder, confined to the root. Errors: kInvalidArgument, kNotFound.
  Result<std::string> FolderOf(const std::string& name) const;
  // Loads `name` into its slot. REQUIRES: lock held on entry; released while loading.
  Status LoadLocked(const std::string& name, std::unique_lock<std::mutex>& lock);

  Runtime& runtime_;
  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable loaded_;      // signalled when a load ends
  std::map<std::string, Slot> slots_;  // guarded by mu_
};

}  // namespace ebb::server
