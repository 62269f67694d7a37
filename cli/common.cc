#include "common.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>

namespace ebb::cli {

Result<MemoryPolicy> PolicyFrom(const CommonOptions& options) {
  if (options.policy_file.empty()) return MemoryPolicy{};
  return LoadMemoryPolicy(options.policy_file);
}

Result<MemoryPolicy> ServerPolicy(const CommonOptions& options, const std::string& release) {
  MemoryPolicy base;
  base.release = ReleaseMode::kIdle;  // a server's default; the file's `release` wins over it
  Result<MemoryPolicy> policy =
      options.policy_file.empty() ? Result<MemoryPolicy>(base) : LoadMemoryPolicy(options.policy_file, base);
  if (!policy.ok()) return policy.status();
  if (!release.empty()) {
    std::optional<ReleaseMode> mode = ParseReleaseMode(release);
    if (!mode) return InvalidArgument("--release must be operation_end, every_run, never or idle, got '" + release + "'");
    policy->release = *mode;
  }
  return policy;
}

std::unique_ptr<Runtime> MakeRuntime(const MemoryPolicy& policy) {
  auto runtime = Runtime::Create(policy);
  if (!runtime.ok()) {
    Fail(runtime.status());
    return nullptr;
  }
  return std::move(runtime).value();
}

std::unique_ptr<Runtime> MakeRuntime(const CommonOptions& options, void (*adjust)(MemoryPolicy&)) {
  auto policy = PolicyFrom(options);
  if (!policy.ok()) {
    Fail(policy.status());
    return nullptr;
  }
  if (adjust) adjust(*policy);
  return MakeRuntime(*policy);
}

Result<ModelArg> ResolveModel(const std::string& model, const CommonOptions& options) {
  return ebb::ResolveModel(model, options.models_dir, "--models");
}

std::string OcrPipelineFolder(const std::string& pipeline, const CommonOptions& options) {
  if (std::filesystem::exists(pipeline)) return pipeline;
  return (std::filesystem::path(options.models_dir) / pipeline).string();
}

std::string DeviceFor(const CommonOptions& options, const ModelArg& model) {
  return ebb::DeviceFor(options.device, model);
}

std::shared_ptr<Session> LoadOrReport(Runtime& runtime, const ModelArg& model, const CommonOptions& options) {
  auto request = DeviceRequest::Parse(DeviceFor(options, model));
  if (!request.ok()) {
    Fail(request.status());
    return nullptr;
  }
  auto session = runtime.Load(model.path, {.device = *request, .graph_optimization = model.config.graph_optimization});
  if (!session.ok()) {
    Fail(session.status());
    return nullptr;
  }
  return *session;
}

std::shared_ptr<Session> LoadOrReport(Runtime& runtime, const std::string& model, const CommonOptions& options) {
  auto resolved = ResolveModel(model, options);
  if (!resolved.ok()) {
    Fail(resolved.status());
    return nullptr;
  }
  return LoadOrReport(runtime, *resolved, options);
}

std::vector<NamedTensor> NoiseImage(const std::string& name, int64_t h, int64_t w, uint32_t seed) {
  Tensor t(DataType::kFloat32, {1, 3, h, w});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.f, 1.f);
  for (float& v : t.values<float>()) v = dist(rng);
  std::vector<NamedTensor> inputs;
  inputs.push_back({name, std::move(t)});
  return inputs;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(i, values.size() - 1)];
}

double Median(std::vector<double> values) { return Percentile(std::move(values), 0.5); }

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t SharedReserved(Runtime& runtime) {
  const std::optional<ArenaStats> a = runtime.ReadMemory().Find("cpu:shared");
  return a ? a->reserved : 0;
}

void PrintJson(const nlohmann::json& j) { std::cout << j.dump(2) << std::endl; }

int Fail(const Status& status) {
  std::fprintf(stderr, "ebb: error: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace ebb::cli

namespace ebb::cli {

RssPeakSampler::RssPeakSampler(int interval_ms) : peak_(ReadRssBytes()) {
  thread_ = std::thread([this, interval_ms] {
    while (!stop_) {
      int64_t rss = ReadRssBytes();
      int64_t seen = peak_.load();
      while (rss > seen && !peak_.compare_exchange_weak(seen, rss)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    }
  });
}

RssPeakSampler::~RssPeakSampler() {
  stop_ = true;
  thread_.join();
}

}  // namespace ebb::cli
