// Internal, for `ebb bench footprint` and `ebb bench ocr` only: a model run by plain ONNX Runtime
// as an application without ebb runs it — ORT's default environment and
// session options (per-session thread pool, per-session arena, memory
// pattern), except the graph optimization level; ORT reads the file itself.
// It is the baseline peer ebb's memory footprint is measured against.
//
// ORT's environment is a process singleton: use a BareOrtModel only in a
// process without an ebb::Runtime (the benchmark runs it in a child process).
// Thread safety: none; one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ebb/memory_policy.h"
#include "ebb/session.h"

namespace ebb::detail {

class BareOrtModel {
 public:
  // Creates the process's plain ORT environment (Load does it otherwise).
  static void CreateEnvironment();
  // Errors: ORT's load errors, as Status. `cpu_arena` false: ORT's
  // DisableCpuMemArena (RapidOCR's enable_cpu_mem_arena: false).
  static Result<std::unique_ptr<BareOrtModel>> Load(const std::string& path, GraphOptimization level,
                                                    bool cpu_arena = true);
  ~BareOrtModel();
  BareOrtModel(const BareOrtModel&) = delete;
  BareOrtModel& operator=(const BareOrtModel&) = delete;

  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  // One plain Run with ORT-allocated outputs (freed before returning); no
  // arena shrink, no heap trim.
  Status Run(const std::vector<NamedTensor>& inputs);
  // The same run, its outputs copied out (ORT's freed before returning).
  Result<std::vector<NamedTensor>> RunCopy(const std::vector<NamedTensor>& inputs);

 private:
  struct Impl;
  explicit BareOrtModel(std::unique_ptr<Impl> impl);
  Result<std::vector<NamedTensor>> RunImpl(const std::vector<NamedTensor>& inputs, bool copy);
  std::unique_ptr<Impl> impl_;
  std::vector<TensorInfo> inputs_;
};

}  // namespace ebb::detail
