#include "ebb/runtime.h"

#include <filesystem>

#include "external_data.h"
#include "log.h"
#include "model_file.h"
#include "ort_context.h"
#include "session_factory.h"

namespace ebb {
namespace {

// "models/convnet/model.onnx" -> "convnet"; "x/upscaler.onnx" -> "upscaler".
std::string DefaultName(const std::string& path) {
  std::filesystem::path p(path);
  if (p.stem() == "model" && p.has_parent_path() && !p.parent_path().filename().empty()) {
    return p.parent_path().filename().string();
  }
  return p.stem().string();
}

// The Session to hand out for a load under `name` from `path`: the cached one when it was loaded
// under that name from that path, else a Session with the caller's name and path on the same
// loaded model (two model files with the same bytes), one per name and path while it is held.
std::shared_ptr<Session> SessionNamed(const std::shared_ptr<Session>& cached, const std::string& name,
                                      const std::string& path) {
  detail::SessionState& s = cached->state();
  std::lock_guard<std::mutex> lock(s.handles_mu);
  if (!path.empty()) s.source_paths.insert(path);
  if (cached->name() == name && cached->source_path() == path) return cached;
  std::erase_if(s.handles, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<Session>& slot = s.handles[name + '\0' + path];
  if (auto held = slot.lock()) return held;
  auto session = std::make_shared<Session>(*cached, name, path);
  slot = session;
  return session;
}

// The names a cached model is held under, joined by '+' (several when shared by content).
std::string HeldNames(Session& cached) {
  std::string names = cached.name();
  detail::SessionState& s = cached.state();
  std::lock_guard<std::mutex> lock(s.handles_mu);
  for (const auto& [name_and_path, handle] : s.handles) {
    const std::string name = name_and_path.substr(0, name_and_path.find('\0'));
    if (!handle.expired() && ("+" + names + "+").find("+" + name + "+") == std::string::npos) names += "+" + name;
  }
  return names;
}

}  // namespace

Runtime::Runtime(std::shared_ptr<detail::RuntimeContext> ctx)
    : ctx_(std::move(ctx)), cache_(std::make_shared<SessionCache>()) {}

Runtime::~Runtime() {
  // No idle release after the Runtime: one must never hold the last reference
  // to the context on the timer's own thread (sessions may outlive us).
  if (ctx_->idle()) ctx_->idle()->Stop();
}

Result<std::unique_ptr<Runtime>> Runtime::Create(const MemoryPolicy& policy) {
  // The parser's bound, for a policy built in code too: thousands of threads take minutes to start,
  // and where they cannot all start ORT's pool ends the process.
  if (policy.intra_op_threads < 0 || policy.intra_op_threads > MaxIntraOpThreads()) {
    return InvalidArgument("policy.intra_op_threads must be an integer from 0 to " +
                           std::to_string(MaxIntraOpThreads()) + " on this machine (4 per hardware thread), got " +
                           std::to_string(policy.intra_op_threads));
  }
  auto ctx = detail::RuntimeContext::Create(policy);
  if (!ctx.ok()) return ctx.status();
  return std::unique_ptr<Runtime>(new Runtime(std::move(ctx).value()));
}

const MemoryPolicy& Runtime::policy() const { return ctx_->policy(); }
size_t Runtime::cached_sessions() const { return cache_->size(); }
uint64_t Runtime::load_count() const { return cache_->total_loads(); }

Result<std::shared_ptr<Session>> Runtime::Load(const std::string& model_path, const LoadOptions& options) {
  // The files are hashed as streams and ORT reads them itself: no copy of
  // them is kept. The model's identity covers its external-data files too
  // (external_data.h). If a file is replaced while ORT reads it, hash and
  // load again.
  for (int attempt = 0;; ++attempt) {
    detail::ModelSource source;
    source.path = model_path;
    Result<std::string> sha256 = detail::Sha256OfFile(model_path, &source.identity);
    if (!sha256.ok()) return sha256.status();
    Result<std::string> identity = detail::IdentifyModelFiles(model_path, source.identity, *sha256, &source.external);
    Result<std::shared_ptr<Session>> session =
        identity.ok() ? LoadSource(source, *identity, options) : Result<std::shared_ptr<Session>>(identity.status());
    Result<detail::FileIdentity> now = detail::StatFile(model_path);
    const bool changed = !session.ok() && session.status().code() == StatusCode::kUnavailable &&
                         (!now.ok() || *now != source.identity || !detail::ExternalDataUnchanged(source.external));
    if (!changed || attempt == 2) return session;
    detail::LogWarning("model file '" + model_path +
                       "' or its external data changed while it was loading; loading it again");
  }
}

Result<std::shared_ptr<Session>> Runtime::LoadFromBytes(const std::string& bytes, const LoadOptions& options) {
  // Bytes have no folder to find external data in (ORT would look in the
  // working directory, and the identity would not cover what it read there).
  // A model whose encoding ebb cannot walk goes on to ORT, which says why.
  Result<std::vector<std::string>> locations = detail::ExternalDataLocations(bytes.data(), bytes.size());
  if (locations.ok() && !locations->empty()) {
    return InvalidArgument("the model bytes name external-data files ('" + locations->front() +
                           "'): load the model from its file, beside them");
  }
  detail::ModelSource source;
  source.bytes = &bytes;
  return LoadSource(source, detail::Sha256Hex(bytes.data(), bytes.size()), options);
}

Result<std::shared_ptr<Session>> Runtime::LoadSource(const detail::ModelSource& source, const std::string& sha256,
                                                     const LoadOptions& options) {
  const std::string& path = source.path;
  detail::SessionSpec spec;
  spec.name = !options.name.empty() ? options.name : path.empty() ? "model" : DefaultName(path);
  spec.source_path = path;
  spec.device = options.device;
  spec.strict_device = options.strict_device.value_or(ctx_->policy().strict_device);
  spec.model_sha256 = sha256;
  spec.graph_optimization = options.graph_optimization.value_or(ctx_->policy().graph_optimization);
  // A level other than the policy's makes another session (its text in the key).
  const std::string level = spec.graph_optimization == ctx_->policy().graph_optimization
                                ? ""
                                : detail::GraphOptionsText(spec.graph_optimization);
  // A model on the CPU is one model however the CPU was asked for: "cpu", or "auto" / a lenient
  // "cuda:N" where CUDA is known not to work (a load that falls back is re-keyed below).
  const SessionKey cpu_key{sha256, "cpu", level};
  const bool falls_back = ctx_->cuda_unavailable().has_value() &&
                          !(spec.strict_device && spec.device.kind == DeviceRequest::Kind::kCuda);
  const SessionKey key = spec.device.kind == DeviceRequest::Kind::kCpu || falls_back
                             ? cpu_key
                             : SessionKey{sha256, spec.device.ToString(),
                                          spec.strict_device ? (level.empty() ? "strict" : "strict;" + level) : level};

  std::weak_ptr<SessionCache> weak_cache = cache_;
  bool loaded = false;
  Result<std::shared_ptr<Session>> cached = cache_->GetOrLoad(key, [&]() -> Result<std::shared_ptr<Session>> {
    auto state = detail::BuildSession(ctx_, source, spec);
    // A load leaves transient heap (ORT's parse and optimization) that only
    // a trim returns: give it back now, so the RSS after a load is what the
    // model costs while idle. (A failed build was trimmed by its destructor.)
    ctx_->TrimHeap(/*force=*/true);
    if (!state.ok()) return state.status();
    auto session = std::make_shared<Session>(std::move(state).value());
    // A session that ran out of memory leaves the cache (under whichever key it is cached); the
    // next Load builds it afresh.
    session->state().on_exhausted = [weak_cache, state = &session->state()](const std::string& name) {
      auto cache = weak_cache.lock();
      if (cache && cache->EraseIf([state](const SessionKey&, const Session& s) { return &s.state() == state; })) {
        detail::LogWarning("dropped session '" + name + "' after it ran out of memory");
      }
    };
    return session;
  }, &loaded);
  if (!cached.ok()) return cached.status();
  if (loaded && key != cpu_key && (*cached)->device().kind == DeviceKind::kCpu) {
    // It fell back to the CPU: cached as the CPU model (a CPU load of it meanwhile wins).
    if (cache_->EraseIfSame(key, cached->get())) cached = cache_->Insert(cpu_key, *cached);
  }
  std::shared_ptr<Session> handle = SessionNamed(*cached, spec.name, path);
  cache_->DropUnused(static_cast<size_t>(ctx_->policy().max_unused_models));
  return handle;
}

size_t Runtime::Unload(const std::string& model_path) {
  // By any file the model was loaded from: copies of one content are one model.
  return cache_->EraseIf([&](const SessionKey&, const Session& s) {
    const detail::SessionState& state = s.state();
    std::lock_guard<std::mutex> lock(state.handles_mu);
    return state.source_paths.count(model_path) > 0;
  });
}

bool Runtime::Unload(const Session& session) {
  return cache_->EraseIf([&](const SessionKey&, const Session& s) { return &s.state() == &session.state(); }) > 0;
}

void Runtime::Clear() { cache_->Clear(); }

Status Runtime::Trim() {
  cache_->DropUnused(static_cast<size_t>(ctx_->policy().max_unused_models));
  for (auto& [key, session] : cache_->Entries()) {
    for (auto& gate : session->state().gates) {
      if (!gate->can_trim()) (void)gate->TrimNowOrDefer();  // released by its next lone run
    }
  }
  detail::IdleReleaser* const idle = ctx_->idle();
  const uint64_t idle_mark = idle ? idle->Mark() : 0;
  if (const auto& gate = ctx_->shared_cpu_gate(); gate && gate->TrimNowOrDefer()) {
    Status st = ctx_->TrimSharedArena();
    ctx_->TrimHeap(/*force=*/true);
    if (idle) idle->Covered(idle_mark);  // the idle release pending for the runs before is done
    return st;
  }
  ctx_->TrimHeap(/*force=*/true);
  return Status::Ok();
}

IdleReleaseHold::IdleReleaseHold(std::shared_ptr<detail::RuntimeContext> ctx) : ctx_(std::move(ctx)) {
  if (ctx_ && ctx_->idle()) ctx_->idle()->Hold();
}
IdleReleaseHold::~IdleReleaseHold() {
  if (ctx_ && ctx_->idle()) ctx_->idle()->Unhold();
}

std::unique_ptr<IdleReleaseHold> Runtime::HoldIdleRelease() {
  return std::unique_ptr<IdleReleaseHold>(new IdleReleaseHold(ctx_));
}

uint64_t Runtime::idle_release_count() const { return ctx_->idle() ? ctx_->idle()->releases() : 0; }

void Runtime::SetIdleReleaseListener(std::function<void(const std::string& model)> listener) {
  if (ctx_->idle()) ctx_->idle()->set_listener(std::move(listener));
}

std::optional<ArenaStats> Runtime::ReadSharedArena() const { return ctx_->ReadSharedArena(); }

int64_t Runtime::shared_arena_cap() const {
  return ctx_->shared_cpu_gate() ? static_cast<int64_t>(ctx_->shared_cap()) : 0;
}

MemoryReading Runtime::ReadMemory() const {
  MemoryReading reading;
  if (auto shared = ctx_->ReadSharedArena()) reading.arenas.push_back(*shared);
  for (ArenaStats& a : ctx_->ReadCudaArenas()) reading.arenas.push_back(std::move(a));  // gpu:N:shared, gpu:N:pool
  for (auto& [key, session] : cache_->Entries()) {
    const std::string names = HeldNames(*session);
    for (ArenaStats& a : session->ReadOwnArenas()) {  // "cpu:<name>" -> "cpu:<every name it is held under>"
      a.name = a.name.substr(0, a.name.size() - session->name().size()) + names;
      reading.arenas.push_back(std::move(a));
    }
  }
  reading.rss_bytes = ReadRssBytes();
  reading.peak_rss_bytes = ReadPeakRssBytes();
  reading.gpus = ReadGpuMemory();
  return reading;
}

}  // namespace ebb
