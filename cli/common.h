// Shared pieces of the `ebb` command line: runtime set-up from flags, model
// arguments, inputs, statistics, JSON output.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ebb/model_config.h"
#include "ebb/model_location.h"
#include "ebb/runtime.h"

namespace ebb::cli {

// Flags every command that runs models shares.
struct CommonOptions {
  std::string policy_file;        // --policy
  std::string models_dir = "models";  // --models
  std::string device = "auto";    // --device
};

// Creates the runtime from --policy (or the defaults), with `adjust` applied.
// Prints the error and returns nullptr on failure.
std::unique_ptr<Runtime> MakeRuntime(const CommonOptions& options, void (*adjust)(MemoryPolicy&) = nullptr);
std::unique_ptr<Runtime> MakeRuntime(const MemoryPolicy& policy);
Result<MemoryPolicy> PolicyFrom(const CommonOptions& options);

// The policy a server runs with: --policy's (or the defaults), its release mode
// from `release` when not empty (--release: operation_end, every_run, never or
// idle), else the file's when it sets one, else `idle`, the library's default
// too, set here so that a change of the library's default does not change the
// server's (docs/memory-policy.md: a server cannot see its clients' operations;
// measured, idle serves bursts at `never`'s speed and gives the memory back
// within the debounce, where `operation_end` costs a request in six or seven). `ebb serve` and the
// in-process servers of `bench http` and `bench grpc` use it, so that the
// benchmarks measure what `ebb serve` runs.
Result<MemoryPolicy> ServerPolicy(const CommonOptions& options, const std::string& release = "");

// A model named on the command line. Every command that takes a model
// resolves it with ResolveModel (ebb/model_location.h, with --models as the
// folder of bare names), so each accepts the same three forms as Python's
// Runtime.load: a model folder, a model file, or a name under --models.
using ModelArg = ModelLocation;
inline constexpr const char* kModelHelp =
    "model file, model folder (model.onnx + optional config.json), or the name of a folder under --models";
// Errors: kNotFound (no such file or folder, or a folder without model.onnx),
// kInvalidArgument (a broken config.json, or something that is neither a file
// nor a folder).
Result<ModelArg> ResolveModel(const std::string& model, const CommonOptions& options);

// An OCR pipeline named on the command line (--pipeline): a folder, else the name of one under --models.
std::string OcrPipelineFolder(const std::string& pipeline, const CommonOptions& options);

// The device to load `model` on: --device unless it is `auto`, else the
// folder config's device, else `auto`.
std::string DeviceFor(const CommonOptions& options, const ModelArg& model);

// Loads a model on DeviceFor(options, model), or prints why not (nullptr).
std::shared_ptr<Session> LoadOrReport(Runtime& runtime, const ModelArg& model, const CommonOptions& options);
// Resolves and loads `model`, or prints why not (nullptr).
std::shared_ptr<Session> LoadOrReport(Runtime& runtime, const std::string& model, const CommonOptions& options);

// A [1,3,h,w] float input of deterministic noise named `name`.
std::vector<NamedTensor> NoiseImage(const std::string& name, int64_t h, int64_t w, uint32_t seed = 1);

double Median(std::vector<double> values);
double Percentile(std::vector<double> values, double p);
double NowMs();

// The shared CPU arena's reserved bytes (0 when there is none).
int64_t SharedReserved(Runtime& runtime);

// Prints a JSON document on stdout.
void PrintJson(const nlohmann::json& j);
int Fail(const Status& status);

}  // namespace ebb::cli

namespace ebb::cli {

// Samples the process RSS on a background thread and keeps the maximum, so a
// peak inside a run is seen and not only the moments between runs.
class RssPeakSampler {
 public:
  explicit RssPeakSampler(int interval_ms = 2);
  ~RssPeakSampler();
  int64_t peak() const { return peak_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> peak_{0};
  std::thread thread_;
};

}  // namespace ebb::cli
