// server/core/repository.h — the model repository behind `ebb serve`.
//
// A repository is a folder with one sub-folder per model. A model folder is
// either flat or versioned:
//
//   flat/                     versioned/              (Triton's layout)
//     model.onnx                config.json           optional, beside the versions
//     config.json  optional     labels.txt            optional
//     labels.txt   optional     1/model.onnx
//                               3/model.onnx
//
// A flat folder serves version "1". A versioned folder serves its highest
// version unless config.json says otherwise ("versions": [1, 3] or "all");
// version folders are decimal numbers. labels.txt (one label per line, line i
// for class i) names the classes of classification results.
//
// Model names are confined to the repository: a name is a single path
// component of [A-Za-z0-9._-] not starting with '.', so no request can name a
// path outside it. The repository's own files are the operator's: symbolic
// links in it are followed wherever they lead (a model folder or file linked
// into a shared store, Hugging Face's cache with its files linked into
// ../../blobs/), as Triton follows them. With Options::confine_links
// (`ebb serve --confine-links`) a model folder, version folder, model file,
// config.json or labels.txt that resolves outside the repository is refused
// instead. Attached models (below: paths a remote caller gives) are always
// confined. config.json and labels.txt are read with LoadModelConfig /
// LoadModelLabels (ebb/model_config.h): anything but a regular file (a FIFO is
// refused without blocking), a file over its size limit and, where confined, a
// link out make the folder not served, with the reason in the index and in the
// load's error.
//
// Attached models: a model file anywhere under a root the caller confined it
// to (ResolveModelFile, ebb/model_location.h) can be served under a name of the same form
// (Attach): ModelMesh's loadModel and KServe's --model-dir. An attached model
// is flat (one version: its version folder's number, else "1"), reads the
// config.json and labels.txt beside its file when there are any, and takes
// precedence over a repository folder of the same name. Detach forgets it.
// With Options::scan false only attached models are served.
//
// Loading, the memory budget, eviction and keep-alive are the ModelPool's
// (ebb/model_pool.h): each served version is one pool entry, named after the
// model ("m" for a flat folder, "m/3" for version 3 of a versioned one). The
// repository registers the versions it finds (re-reading config.json on an
// explicit load, or taking the load request's configuration instead) and
// hands requests a lease that holds the model for the request's duration, so
// unloading or evicting never destroys a session under a running request.
// Looking at models (Index, Info, Signature, Folder) never loads or evicts one.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ebb/model_config.h"
#include "ebb/model_pool.h"
#include "ebb/model_signature.h"
#include "ebb/runtime.h"
#include "ebb/model_location.h"

namespace ebb::server {

// One served version of a model, as the index lists it.
struct ModelInfo {
  std::string name;
  std::string version;       // "1" for a flat folder; "" when the folder cannot be read
  PoolState state = PoolState::kUnloaded;
  std::string reason;        // why it is not ready, when known
  int64_t charge_bytes = 0;  // the pool's measured charge
  int64_t transient_bytes = 0;  // largest operation peak seen
  int in_flight = 0;
  bool pinned = false;
  uint64_t loads = 0;
  // Admission by memory (the pool's ModelStatus):
  std::vector<NeedPoint> need_points;        // the memory its runs were measured to need, by input size
  std::vector<NeedPoint> arena_need_points;  // the shared arena they were measured to need
  int64_t last_need_bytes = 0;         // what its latest run was predicted to need and reserved (memory,
  int64_t last_arena_need_bytes = 0;   // arena)
  int64_t reserved_bytes = 0;          // reserved by its runs in flight
  int waiting_for_memory = 0;
  uint64_t out_of_memory = 0;
};

// A model folder as registered: what is served from it and how.
struct ModelFolder {
  std::string name;
  bool versioned = false;             // version sub-folders (else a flat folder: version "1")
  std::vector<std::string> versions;  // served, in ascending order
  // config.json, or the last load request's configuration (never null; shared and never changed in
  // place, so that every request takes it without a copy: a new configuration replaces the pointer)
  std::shared_ptr<const ModelConfig> config = std::make_shared<const ModelConfig>();
  bool config_from_request = false;
  bool config_file = false;           // the folder has a config.json (else `config` is the defaults)
  // labels.txt (never null; shared, since a ModelFolder is copied for every request)
  std::shared_ptr<const std::vector<std::string>> labels = std::make_shared<const std::vector<std::string>>();
  std::string file;                   // attached (Attach): the model file; "" for a repository folder
};

// A folder of the repository that cannot be served, and why.
struct FolderProblem {
  std::string folder;
  std::string reason;
};

// What a request holds while it runs.
struct ModelHandle {
  std::string name;
  std::string version;
  ModelConfig config;
  Lease lease;  // keeps the model loaded
  const std::shared_ptr<Session>& session() const { return lease.session(); }
};

class ModelRepository {
 public:
  struct Options {
    std::string root;            // the repository folder
    bool scan = true;            // serve the root's sub-folders as models (false: attached models only)
    bool load_on_demand = true;  // a request to a model not loaded loads it
    std::string default_device = "auto";  // for models whose config.json names none
    bool confine_links = false;  // refuse repository files whose links lead out of `root` (see above)
    PoolOptions pool;            // memory budget, waiting, default keep-alive
    ModelPool::EventFn on_event; // loads and evictions, for metrics
  };

  // Errors: kNotFound when `root` is not a folder.
  static Result<std::unique_ptr<ModelRepository>> Open(Runtime& runtime, Options options);

  // Every served version of every model folder under the root (scanned now),
  // in name and version order. A model folder that cannot be read is listed
  // once, with version "" and the reason.
  std::vector<ModelInfo> Index();
  // Info on one version ("" = the default version). Errors: kInvalidArgument
  // (bad name, unreadable folder), kNotFound (unknown model or version).
  Result<ModelInfo> Info(const std::string& name, const std::string& version = "");
  // The folders that cannot be served, with the reason (for start-up warnings).
  std::vector<FolderProblem> Problems();

  // The model's registration. Errors: as Info.
  Result<ModelFolder> Folder(const std::string& name);
  // `version`, or the default (highest served) one for "". Errors: kNotFound
  // naming the versions served.
  Result<std::string> ResolveVersion(const std::string& name, const std::string& version);
  // Whether the model is registered already (nothing is read otherwise), `version` resolves to a
  // served version, and that version is loaded and ready now; then *route is its route (Resolve).
  struct Route;
  bool PlacedNow(const std::string& name, const std::string& version, Route* route);
  // The inputs and outputs of a served version, without loading it (from its
  // session, its last session, or its file).
  Result<ModelSignature> Signature(const std::string& name, const std::string& version = "");

  // Loads every served version of a model, re-reading config.json, or taking
  // `config` instead of it when given (until the next load without one). The
  // model stays loaded whatever the keep-alive until a request applies its own.
  // Errors: kInvalidArgument (bad name, broken model or config), kNotFound,
  // kUnavailable, kResourceExhausted.
  Status Load(const std::string& name, std::optional<ModelConfig> config = std::nullopt);
  // Unloads every version of a model; a session goes when the last request using it ends.
  Status Unload(const std::string& name);
  // Serves the model file `file.path` under `name` (not loaded yet: Load).
  // REQUIRES: the caller confined the path (ResolveModelFile). Attaching a
  // name again with another file unloads the old one first. `pinned`: never
  // evicted to fit the budget or by keep-alive.
  // Errors: kInvalidArgument (a name not of [A-Za-z0-9._-] or starting with
  // '.', a broken config.json beside the file).
  Status Attach(const std::string& name, const ModelFile& file, bool pinned = false);
  // Unloads an attached model and forgets it (kNotFound afterwards). OK when
  // `name` is not attached.
  Status Detach(const std::string& name);
  // The names of the attached models.
  std::vector<std::string> Attached() const;
  bool IsAttached(const std::string& name) const;

  // Loads every model; returns the failures (the others load).
  std::vector<std::pair<std::string, Status>> LoadAll();

  // A ready model for a request (loaded on demand when allowed).
  // Errors: kNotFound, kInvalidArgument, kUnavailable (not loaded, or its load
  // failed), kResourceExhausted (does not fit the memory budget).
  Result<ModelHandle> Acquire(const std::string& name, const std::string& version = "",
                              std::optional<int64_t> keep_alive_ms = std::nullopt);
  // The body RunWithRecovery runs: one run (or operation) of a request on the
  // version's configuration and session. Called on RunWithRecovery's thread,
  // after the pool's admission (by memory, when options.run_elements is set),
  // and at most twice: again, on a fresh load, when the first call returned
  // kResourceExhausted, so a body must be safe to call again after it failed.
  // Its Status is RunWithRecovery's. The references are valid during the call.
  using RunBody = std::function<Status(const ModelConfig& config, const std::shared_ptr<Session>& session)>;
  // A request's way to a served version, found once (Resolve) and then run on (RunWithRecovery
  // below): what `version` ("" = the default) resolves to, its name in the pool and its
  // configuration as it was when resolved.
  struct Route {
    std::string name;
    std::string version;
    std::string pool_name;
    std::shared_ptr<const ModelConfig> config;
  };
  // Registers the model first when it is not yet. Errors: as Info.
  Status Resolve(const std::string& name, const std::string& version, Route* route);
  // Runs `body` on a version of the model with the pool's admission by memory
  // (`options.run_elements`, deadline, cancellation) and its out-of-memory
  // recovery: on kResourceExhausted, idle models are evicted, arenas trimmed,
  // and `body` runs once more on a fresh load. `options.load_on_demand` is
  // the repository's.
  Status RunWithRecovery(const std::string& name, const std::string& version, AcquireOptions options,
                         const RunBody& body);
  // The same on a route Resolve found (the request that resolved it runs on what it resolved).
  Status RunWithRecovery(const Route& route, AcquireOptions options, const RunBody& body);

  const std::string& root() const { return options_.root; }
  // The device of models whose configuration names none (ebb serve --device).
  const std::string& default_device() const { return options_.default_device; }
  ModelPool& pool() { return *pool_; }
  // The model a pool entry belongs to ("m/3" -> "m").
  static std::string ModelOfPoolName(const std::string& pool_name);

 private:
  struct Layout;
  ModelRepository(Runtime& runtime, Options options);
  // The model's folder (its real path). Errors: kInvalidArgument (a bad name; with confine_links,
  // a folder that resolves outside the root), kNotFound.
  Result<std::string> FolderOf(const std::string& name) const;
  // The root the repository's files must resolve inside: `root` with confine_links, else "".
  std::string ConfinedTo() const;
  // Registers the model (once, or again when `reread`), with the pool too.
  Result<ModelFolder> Register(const std::string& name, bool reread, std::optional<ModelConfig> config = std::nullopt);
  Result<ModelFolder> Read(const std::string& name, std::optional<ModelConfig> config) const;
  std::string PoolName(const ModelFolder& model, const std::string& version) const;
  // The route to `version` of `model` (registered as `name`), or kNotFound naming the versions served.
  Status RouteIn(const ModelFolder& model, const std::string& name, const std::string& version, Route* route) const;
  // For a registered model (true; nothing is read otherwise, and the caller registers it): its
  // route (RouteIn) under one lock, without a copy of the folder (every request asks).
  bool ResolveRegistered(const std::string& name, const std::string& version, Route* route, Status* status);
  std::string ModelPath(const ModelFolder& model, const std::string& version) const;
  Status LoadFailure(const std::string& name, const Status& status) const;

  const Options options_;
  std::unique_ptr<ModelPool> pool_;
  mutable std::mutex mu_;
  std::map<std::string, ModelFolder> models_;       // registered models; guarded by mu_
  // The one ResolveRegistered found last, kept at hand (a server's requests ask for one model many
  // times in a row; a map lookup compares names all the way down); guarded by mu_, cleared when erased.
  const std::pair<const std::string, ModelFolder>* found_ = nullptr;
  std::map<std::string, std::string> bad_configs_;  // registration errors; guarded by mu_
};

}  // namespace ebb::server
