// The `ebb bench ...` commands. Each prints one JSON document on stdout and
// returns the process exit code.
#pragma once

#include <string>

#include "common.h"

namespace ebb::cli {

// The folder of generated models (the `generated_models` target's conv_10mb, conv_100mb, ...):
// `given` (--generated), else `generated_models` beside this binary.
std::string GeneratedModelsDir(const std::string& given);

struct BenchOptions {
  CommonOptions common;
  std::string model;              // as ResolveModel takes it; "" = the benchmark's default
  int64_t size = 0;               // input side in pixels; 0 = the benchmark's default
  int iterations = 0;             // 0 = the benchmark's default (quick)
  bool json = true;               // --json (JSON is the only output)
  int64_t budget_bytes = 0;       // bench switch: 0 = 2.5x one model's measured charge
};

// `ebb bench footprint`: memory per model, ebb against plain ORT (bench_footprint.cc).
struct FootprintOptions {
  CommonOptions common;
  std::string generated_dir;  // --generated: default `generated_models` beside the binary
  std::string sizes = "10,100,300";  // generated conv models, MB of weights
  std::string bundled = "convnet,tiny,mixed,twochannel,ppocr_det,waifu2x_scale2x";  // under --models
  std::string levels = "all,extended,basic,disabled";
  int cycles = 20;          // ebb's load -> infer -> unload cycles after the first
  int baseline_cycles = 3;  // plain ORT's (its loads are the slow part of the run)
  int64_t side = 64;        // spatial side of 4-D inputs
  bool json = true;
  // Hidden: the child process that measures one configuration.
  std::string worker;  // "ebb" or "ort"
  std::string worker_model, worker_level, worker_cache_dir;
};

int BenchFootprint(const FootprintOptions& options);

// `ebb bench ocr`: the OCR pipeline against plain ORT as RapidOCR runs it, burst and page by page
// (bench_ocr.cc).
struct OcrBenchOptions {
  CommonOptions common;
  int pages = 40;
  std::string pipeline = "ocr";  // a pipeline folder, or its name under --models
  std::string render_script = "tests/ocr/render_pages.py";
  std::string generated_dir;  // --generated: default `generated_models` beside the binary (conv_100mb, for switching)
  bool json = true;
  // Hidden: the child process that measures one configuration one way.
  std::string worker;       // "ebb", "ort_arena", "ort_noarena"
  std::string worker_mode;  // "burst", "page"
  std::string pages_dir;
};
int BenchOcr(const OcrBenchOptions& options);

// `ebb bench modelmesh`: the sizes reported to ModelMesh against measured RSS (bench_modelmesh.cc).
struct ModelMeshBenchOptions {
  CommonOptions common;
  std::string generated_dir;         // --generated: default `generated_models` beside the binary
  std::string sizes = "10,100,300";  // generated conv models, MB of weights
  bool json = true;
};
int BenchModelMesh(const ModelMeshBenchOptions& options);

// `ebb bench concurrency`: N concurrent clients with admission by memory, beside the baselines
// (bench_concurrency.cc).
struct ConcurrencyOptions {
  CommonOptions common;
  std::string model = "convnet";  // as ResolveModel takes it
  // 1280x1280: the convnet's run needs 200 MiB of arena (16-channel activations of 100 MiB), and
  // takes 0.25-0.6 s on two cores, so the whole benchmark takes three to five minutes there.
  int64_t side = 1280;
  int64_t cap_bytes = 0;  // the shared arena's cap; 0 = 2.5 times one run's arena peak (measured first)
  int rounds = 3;         // times each N goes round the modes; a mode's throughput is the median of its rounds
  bool json = true;
  // Hidden: the child process that measures one mode at one N.
  std::string worker;  // "admission", "admission_off", "uncapped", "serial"
  int clients = 1;
};
int BenchConcurrency(const ConcurrencyOptions& options);

// `options` with `fallback` as its model when none was given.
inline BenchOptions WithModel(BenchOptions options, const char* fallback) {
  if (options.model.empty()) options.model = fallback;
  return options;
}

int BenchOverhead(const BenchOptions& options);
int BenchFloor(const BenchOptions& options);
int BenchRelease(const BenchOptions& options);
// `ebb bench loop`: single runs back to back under operation_end, idle and never (bench_loop.cc).
int BenchLoop(const BenchOptions& options);
int BenchHttp(const BenchOptions& options);
// `ebb bench instructions`: `ebb serve`'s instructions per tiny JSON request beyond the run, under callgrind.
int BenchInstructions(const BenchOptions& options);
int BenchGrpc(const BenchOptions& options);
// `ebb bench stream`: operations sent as many requests, under each release mode (bench_stream.cc).
int BenchStream(const BenchOptions& options);
int BenchSwitch(const BenchOptions& options);
int BenchSessions(const BenchOptions& options);
int BenchJson(const BenchOptions& options);

}  // namespace ebb::cli
