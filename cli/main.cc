// `ebb`: the command line. A thin layer: it parses flags into the library's
// types and calls the library; every command lives in its own file.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "bench.h"
#include "commands.h"
#include "ebb/version.h"
#include "ebb/model_config.h"
#include "ebb/model_signature.h"
#include "port.h"

namespace ebb::cli {
namespace {

void AddCommon(CLI::App* app, CommonOptions* options) {
  app->add_option("--policy", options->policy_file, "memory policy JSON file (docs/memory-policy.md)");
  app->add_option("--models", options->models_dir, "folder of bundled models")->capture_default_str();
  app->add_option("--device", options->device, "auto, cpu or cuda:N")->capture_default_str();
}

// The transport's threads, limits and deadlines (defaults and reasons: server/http/http_server.h,
// docs/server.md "Limits and hostile input").
void AddHttpOptions(CLI::App* serve, server::HttpOptions* http, server::ServiceOptions* service) {
  auto positive = [&](const char* flag, auto* value, const char* help) {
    serve->add_option(flag, *value, help)->capture_default_str()->check(CLI::PositiveNumber);
  };
  positive("--http-threads", &http->threads, "worker threads for inferences, loads and unloads (control requests have threads of their own)");
  positive("--io-threads", &http->io_threads, "event-loop threads (accept, read, frame, write; health probes; above 1, all but one also run a request each)");
  serve
      ->add_option("--quick-run-us", http->quick_run_us,
                   "an inference with nothing in flight beside it, whose model's last request took less than this, "
                   "runs on the event loop without the hop to a worker (0: never)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  positive("--max-connections", &http->max_connections, "connections open at once; one more gets 503");
  positive("--max-header-bytes", &http->max_header_bytes, "request line plus header fields (431 beyond)");
  positive("--max-uri-bytes", &http->max_uri_bytes, "request target (414 beyond)");
  positive("--max-body-bytes", &http->max_body_bytes,
           "request body after decoding and decompression (413 beyond); also the gRPC message limit");
  positive("--max-body-bytes-in-flight", &service->max_request_bytes_in_flight,
           "request bytes held by all HTTP bodies and gRPC messages being received or answered, together "
           "(503 / UNAVAILABLE beyond; at least --max-body-bytes)");
  positive("--read-timeout-s", &http->read_timeout_s, "longest wait for the next bytes of a request (408)");
  positive("--write-timeout-s", &http->write_timeout_s,
           "longest time to send a reply (HTTP: the connection is closed; gRPC: the call is cancelled)");
  positive("--header-timeout-s", &http->header_timeout_s, "a request's whole header, from its first byte (408)");
  positive("--body-timeout-s", &http->body_timeout_s, "a request's whole body, from the end of its header (408)");
  positive("--idle-timeout-s", &http->idle_timeout_s, "a keep-alive connection without a request is closed after this");
}

int RunInfo(const CommonOptions& common, const std::string& model) {
  auto resolved = ResolveModel(model, common);
  if (!resolved.ok()) return Fail(resolved.status());
  auto runtime = MakeRuntime(common);
  if (!runtime) return 1;
  auto session = LoadOrReport(*runtime, *resolved, common);
  if (!session) return 1;
  auto describe = [](const std::vector<TensorInfo>& infos) {
    nlohmann::json list = nlohmann::json::array();
    for (const TensorInfo& t : infos) list.push_back({{"name", t.name}, {"datatype", DataTypeName(t.type)}, {"shape", t.shape}});
    return list;
  };
  // The files it reads (ONNX external data beside it, when any), checked by the load above.
  Result<ModelFiles> files = ReadModelFiles(resolved->path);
  if (!files.ok()) return Fail(files.status());
  PrintJson({{"name", session->name()},
             {"file", resolved->path},
             {"external_data", files->external_data},
             {"file_bytes", files->total_bytes},
             {"device", session->device().ToString()},
             {"provider", session->device().provider},
             {"fallback_reason", session->device().fallback_reason},
             {"release_targets", session->release_targets()},
             {"inputs", describe(session->inputs())},
             {"outputs", describe(session->outputs())}});
  return 0;
}

// `ebb --version`: ebb's version (the one the server reports), ONNX Runtime's
// as loaded at run time, and the providers ebb can use in this build.
std::string VersionText() {
  const ebb::ProviderSupport providers = ebb::ReadProviderSupport();
  std::string available;
  for (const std::string& p : providers.available) available += (available.empty() ? "" : ", ") + p;
  std::string cuda = std::string("CUDA provider library: ") + ebb::CudaLibraryName(providers.cuda);
  using Cuda = ebb::ProviderSupport::CudaLibrary;
  switch (providers.cuda) {
    case Cuda::kMissing: cuda += " (no " + providers.cuda_path + "; " + ebb::port::kCudaProviderHint + ")"; break;
    case Cuda::kNotLoadable: cuda += " (" + providers.cuda_path + ": " + providers.cuda_detail + ")"; break;
    case Cuda::kLoadable: cuda += " (" + providers.cuda_path + "; a CUDA session also needs a device and driver)"; break;
  }
  const bool cuda_usable = providers.cuda == Cuda::kLoadable;
  return std::string("ebb ") + ebb::Version() + "\nONNX Runtime " + ebb::OrtVersion() +
         "\nproviders built into ONNX Runtime: " + available + "\n" + cuda + "\nproviders ebb can use: " +
         (cuda_usable ? "CUDAExecutionProvider, CPUExecutionProvider" : "CPUExecutionProvider");
}

}  // namespace
}  // namespace ebb::cli

int main(int argc, char** argv) {
  using namespace ebb::cli;
  // Regrowing an arena after a release costs one page fault per 4 KiB page;
  // on virtual machines a fault can cost ~15 us (measured here: touching
  // 256 MiB took 1 s with 4 KiB pages, 40 ms with transparent huge pages).
  // glibc backs its large blocks with huge pages when glibc.malloc.hugetlb=1
  // is set at start-up: so ebb re-executes itself once with it set
  // (port::RestartWithHugePageHeap). EBB_NO_HUGEPAGES=1 opts out.
  ebb::port::RestartWithHugePageHeap(argv);
  // The arguments as UTF-8 (Windows reads them as UTF-16: a model folder or image named in Chinese),
  // converted here once; output in UTF-8 too.
  std::vector<std::string> args = ebb::port::Utf8Arguments(argc, argv);
  std::vector<char*> arg_pointers;
  for (std::string& arg : args) arg_pointers.push_back(arg.data());
  argc = static_cast<int>(arg_pointers.size());
  argv = arg_pointers.data();
  ebb::port::UseUtf8Console();
  if (ebb::Status st = ebb::port::CheckOrtLibrary(); !st.ok()) return Fail(st);
  CLI::App app{"ebb: run ONNX models, keep them loaded, give their inference memory back"};
  app.require_subcommand(1);
  app.set_version_flag("--version", VersionText, "print the versions of ebb and ONNX Runtime and the providers, and exit");

  DemoOptions demo;
  auto* demo_cmd = app.add_subcommand("demo", "show memory after load, at an operation's peak, and after release");
  AddCommon(demo_cmd, &demo.common);
  demo_cmd->add_option("--size", demo.size, "image side in pixels (ppocr_det: rounded up to 32, at most 960)")
      ->capture_default_str();

  RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "run an image-to-image model over images as one operation");
  AddCommon(run_cmd, &run.common);
  run_cmd->add_option("model", run.model, kModelHelp)->required();
  run_cmd->add_option("--input,-i", run.inputs, "input images (PNG/JPEG); several are the frames of one operation")
      ->required();
  run_cmd->add_option("--output,-o", run.outputs, "output images, one per input: .png, or .jpg / .jpeg (JPEG)")
      ->required();
  run_cmd->add_option("--jpeg-quality", run.jpeg_quality, "quality of JPEG outputs, 1..100")->capture_default_str();
  // The ranges a model folder's config.json allows (ebb/model_config.h).
  run_cmd->add_option("--tile", run.tile, "tile side in pixels (0 = the model folder's config)")
      ->check(CLI::Range(int64_t{0}, ebb::kMaxTileSide));
  run_cmd->add_option("--overlap", run.overlap, "context pixels around each tile's core")
      ->check(CLI::Range(int64_t{0}, ebb::kMaxTileSide));
  run_cmd->add_option("--memory-report", run.memory_report, "write memory sampled at every run as JSON");
  run_cmd->add_option("--plot", run.plot, "write the memory timeline as SVG");

  ServeOptions serve;
#ifdef EBB_NO_GRPC
  serve.grpc_port = 0;  // a build without gRPC (the Windows one) serves HTTP only: docs/windows.md
  auto* serve_cmd = app.add_subcommand(
      "serve", "KServe v2 / Open Inference Protocol server over a model folder: HTTP only, this build has no gRPC");
#else
  auto* serve_cmd = app.add_subcommand("serve", "KServe v2 / Open Inference Protocol server over a model folder");
#endif
  AddCommon(serve_cmd, &serve.common);
  serve_cmd->add_option("--repository", serve.repository, "model repository folder")->capture_default_str();
  serve_cmd->add_flag("--confine-links", serve.confine_links,
                      "refuse repository files (model folders, model.onnx, config.json, labels.txt) that are links "
                      "leading out of the repository; by default they are followed");
  serve_cmd->add_option("--host", serve.http.host, "address to listen on")->capture_default_str();
  serve_cmd->add_option("--port", serve.http.port, "HTTP port (0 = any free port)")->capture_default_str();
  serve_cmd->add_option("--grpc-port", serve.grpc_port, "gRPC port (0 = no gRPC, -1 = any free port)")
      ->capture_default_str();
  serve_cmd->add_option("--workers", serve.service.workers,
                        "inferences running at once: a CPU bound (memory is admitted per run, see below)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  serve_cmd->add_option("--queue", serve.service.queue,
                        "inferences waiting (for a worker or for memory) before 503")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  int64_t queue_timeout_ms = serve.service.queue_timeout.count();
  serve_cmd->add_option("--queue-timeout-ms", queue_timeout_ms,
                        "longest a request waits for a worker and for memory together, then 503")
      ->check(CLI::Range(int64_t{1}, ebb::kMaxWaitForCapacityMs))
      ->capture_default_str();
  serve_cmd->add_option("--release", serve.release,
                        "when inference memory goes back: idle (default, unless --policy sets release: once no "
                        "request has run for the policy's idle_release_ms), operation_end (after every request, "
                        "or at a sequence's end), never, every_run");
  serve_cmd->add_option("--max-sequences", serve.service.sequences.max_open,
                        "sequences of requests (parameters sequence_id/start/end) open at once; one more start: 503")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  int64_t sequence_timeout_ms = serve.service.sequences.idle_timeout.count();
  serve_cmd->add_option("--sequence-timeout-ms", sequence_timeout_ms,
                        "a sequence with no request for this long is ended by the server and its memory released")
      ->check(CLI::Range(int64_t{1}, ebb::kMaxWaitForCapacityMs))
      ->capture_default_str();
  bool no_memory_admission = false;
  serve_cmd->add_flag("--no-memory-admission", no_memory_admission,
                      "admit runs by the worker count only (the behaviour before admission by memory; to compare)");
  serve_cmd->footer(
      "Admission by memory: each model learns what its runs need beside its weights, as a function of their\n"
      "input size (measured when a run is alone; a model's first run runs alone to be measured). Before a run\n"
      "starts, its predicted need is reserved against what the device has left: the shared CPU arena's cap\n"
      "(policy cpu.arena_settings.max_bytes), the memory budget less the loaded models' charges, the container's\n"
      "limit. A run that does not fit waits, in arrival order, until reservations come back (503 after\n"
      "--queue-timeout-ms; a client that disconnects leaves the line); one that could never fit, even alone, gets\n"
      "503 at once with its predicted need and the limit. A run that still runs out of memory is retried once,\n"
      "alone, after the runs in flight drained, and its model's prediction is raised. docs/memory-budget.md.");
  AddHttpOptions(serve_cmd, &serve.http, &serve.service);
  serve_cmd->add_option("--grpc-threads", serve.grpc_threads,
                        "gRPC worker threads for ModelInfer and the RPCs that may block, started as needed; "
                        "a request waiting for admission holds one")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  serve_cmd->add_flag("--grpc-compressed-requests", serve.grpc_compressed_requests,
                      "accept gzip/deflate-compressed gRPC requests (gRPC inflates one whole before checking "
                      "--max-body-bytes: a small message can cost the limit times 1000; trusted clients only)");
  serve_cmd->add_option("--memory-budget", serve.pool.cpu_budget_bytes,
                        "CPU memory budget for loaded models in bytes (0 = --budget-fraction of RAM)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve_cmd->add_option("--budget-fraction", serve.pool.cpu_budget_fraction, "CPU budget as a fraction of RAM")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  serve_cmd->add_option("--cuda-memory-budget", serve.pool.cuda_budget_bytes, "budget per GPU in bytes (0 = 90%)")
      ->check(CLI::NonNegativeNumber);
  int64_t wait_ms = 0;
  serve_cmd->add_option("--wait-for-capacity-ms", wait_ms, "wait this long for a model to fit the budget (for models in flight to finish) before 503")
      ->check(CLI::Range(int64_t{0}, ebb::kMaxWaitForCapacityMs));
  serve_cmd->add_option("--keep-alive-ms", serve.pool.default_keep_alive_ms,
                        "default keep_alive: unload after this idle time (0 = after each request, -1 = never)")
      ->check(CLI::Range(std::numeric_limits<int64_t>::min(), ebb::kMaxKeepAliveMs))
      ->capture_default_str();
  serve_cmd->add_flag("!--no-load", serve.load_all, "do not load the models at start-up");
  serve_cmd->add_flag("!--no-load-on-demand", serve.load_on_demand, "answer 503 for models not loaded");
  auto* modelmesh_flag = serve_cmd->add_flag(
      "--modelmesh", serve.modelmesh,
      "also serve ModelMesh's model-runtime SPI (mmesh.ModelRuntime) on the gRPC port; its runtimeStatus unloads "
      "every model");
  serve_cmd->add_option("--model-root", serve.model_root,
                        "ModelMesh: loadModel paths must resolve inside this folder (default: --repository)")
      ->needs(modelmesh_flag);
  auto* model_name_opt = serve_cmd->add_option(
      "--model-name", serve.model_name, "KServe single-model form: serve the model of --model-dir under this name");
  auto* model_dir_opt = serve_cmd->add_option(
      "--model-dir", serve.model_dir,
      "KServe single-model form: the model folder (model.onnx, one .onnx file, or N/model.onnx), e.g. /mnt/models");
  model_name_opt->needs(model_dir_opt);
  model_dir_opt->needs(model_name_opt);

  OcrCliOptions ocr;
  auto* ocr_cmd = app.add_subcommand("ocr", "recognise the text of images (PP-OCR: detector, angle classifier, recogniser) as one operation");
  AddCommon(ocr_cmd, &ocr.common);
  ocr_cmd->add_option("images", ocr.images, "image files (PNG/JPEG)")->required();
  ocr_cmd->add_option("--pipeline", ocr.pipeline, "OCR pipeline folder (config.json of kind \"ocr\"), or its name under --models")
      ->capture_default_str();
  ocr_cmd->add_flag("--json", ocr.json, "per image, per line: text, confidence and the box's four points as JSON");
  ocr_cmd->add_option("--limit-side-len", ocr.options.limit_side_len, "detector input: longer side limit for small pages")
      ->capture_default_str();
  ocr_cmd->add_option("--max-side-len", ocr.options.max_side_len, "detector input: longer side at most this")
      ->capture_default_str();
  ocr_cmd->add_option("--unclip-ratio", ocr.options.unclip_ratio, "how much each detected box is grown")
      ->capture_default_str();
  ocr_cmd->add_option("--box-threshold", ocr.options.box_threshold, "a box's least mean probability")
      ->capture_default_str();
  ocr_cmd->add_option("--dilation", ocr.options.use_dilation,
                      "dilate the detector's binary map by 2x2 before finding boxes (true/false; false: PaddleOCR's)")
      ->capture_default_str();
  ocr_cmd->add_option("--cls-page-majority", ocr.options.cls_page_majority,
                      "turn lines classed 180 degrees only when they are half of the page's (true/false; false: each line alone)")
      ->capture_default_str();
  ocr_cmd->add_option("--drop-score", ocr.options.drop_score, "lines less confident than this are dropped")
      ->capture_default_str();

  CommonOptions info_common;
  std::string info_model;
  auto* info_cmd = app.add_subcommand("info", "describe a model as ebb loads it");
  AddCommon(info_cmd, &info_common);
  info_cmd->add_option("model", info_model, kModelHelp)->required();

  CommonOptions policy_common;
  auto* policy_cmd = app.add_subcommand("policy", "print the effective memory policy as JSON");
  policy_cmd->add_option("--policy", policy_common.policy_file, "memory policy JSON file");

#ifndef EBB_NO_BENCHMARKS
  auto* bench_cmd = app.add_subcommand("bench", "benchmarks; each prints JSON");
  bench_cmd->require_subcommand(1);
  BenchOptions bench;
  auto add_bench = [&](const char* name, const char* help) {
    auto* cmd = bench_cmd->add_subcommand(name, help);
    AddCommon(cmd, &bench.common);
    cmd->add_option("--model", bench.model, std::string(kModelHelp) + " (default: the benchmark's own)");
    cmd->add_option("--size", bench.size, "input side in pixels (0 = the benchmark's default)");
    cmd->add_option("--iterations", bench.iterations, "iterations (0 = the benchmark's default)");
    cmd->add_flag("--json", bench.json, "print JSON (the only output format; accepted for clarity)");
    return cmd;
  };
  auto* overhead_cmd = add_bench("overhead", "the run boundary against a bare ORT Run on the same session and input");
  auto* floor_cmd = add_bench("floor", "reserved and RSS after load, at the peak, and after release");
  auto* release_cmd = add_bench("release", "a tiled multi-frame operation under every release mode");
  auto* loop_cmd = add_bench("loop", "single runs back to back under operation_end, idle and never, then a pause");
  auto* http_cmd = add_bench("http", "the server's own cost per request over the run boundary");
  auto* instructions_cmd = add_bench("instructions", "ebb serve's instructions per tiny JSON request beyond the run (callgrind)");
#ifndef EBB_NO_GRPC
  auto* grpc_cmd = add_bench("grpc", "the gRPC front end's cost per request, beside HTTP's, in one run");
  auto* stream_cmd = add_bench("stream",
                               "operations sent as many requests: throughput and memory under operation_end, idle and "
                               "never, and a tiled operation as one sequence (--model: the upscaler)");
#endif
  auto* switch_cmd = add_bench("switch", "models rotating under all_resident, destroy_on_switch and budget_lru");
  switch_cmd->add_option("--budget-bytes", bench.budget_bytes, "budget_lru's budget (0 = one run's measured need + 2.5x one model's charge)");
  auto* sessions_cmd = add_bench("sessions", "1 to 16 sessions: per-session arenas against one shared capped arena");
  FootprintOptions footprint;
  auto* footprint_cmd = bench_cmd->add_subcommand(
      "footprint", "memory per model (load, inference, unload, cycles) at each optimization level, against plain ORT");
  AddCommon(footprint_cmd, &footprint.common);
  footprint_cmd->add_option("--generated", footprint.generated_dir, "folder of the generated conv_<N>mb models");
  footprint_cmd->add_option("--sizes", footprint.sizes, "generated models, MB of weights")->capture_default_str();
  footprint_cmd->add_option("--bundled", footprint.bundled, "models under --models")->capture_default_str();
  footprint_cmd->add_option("--levels", footprint.levels, "graph optimization levels")->capture_default_str();
  footprint_cmd->add_option("--cycles", footprint.cycles, "ebb's load-infer-unload cycles")->capture_default_str();
  footprint_cmd->add_option("--baseline-cycles", footprint.baseline_cycles, "plain ORT's cycles")->capture_default_str();
  footprint_cmd->add_option("--size", footprint.side, "side of 4-D inputs")->capture_default_str();
  footprint_cmd->add_flag("--json", footprint.json, "print JSON (the only output format)");
  footprint_cmd->add_option("--worker", footprint.worker)->group("");
  footprint_cmd->add_option("--worker-model", footprint.worker_model)->group("");
  footprint_cmd->add_option("--worker-level", footprint.worker_level)->group("");
  footprint_cmd->add_option("--worker-cache-dir", footprint.worker_cache_dir)->group("");
#ifndef EBB_NO_GRPC
  ModelMeshBenchOptions modelmesh_bench;
  auto* modelmesh_cmd = bench_cmd->add_subcommand(
      "modelmesh", "sizes reported to ModelMesh (predicted, loaded, modelSize) against measured RSS growth per model");
  AddCommon(modelmesh_cmd, &modelmesh_bench.common);
  modelmesh_cmd->add_option("--generated", modelmesh_bench.generated_dir, "folder of the generated conv_<N>mb models");
  modelmesh_cmd->add_option("--sizes", modelmesh_bench.sizes, "generated models, MB of weights")->capture_default_str();
  modelmesh_cmd->add_flag("--json", modelmesh_bench.json, "print JSON (the only output format)");
#endif
  OcrBenchOptions ocr_bench;
  auto* ocr_bench_cmd = bench_cmd->add_subcommand(
      "ocr", "OCR pages of varied sizes: ebb against plain ORT as RapidOCR runs it (arena on, off), burst and page by page");
  AddCommon(ocr_bench_cmd, &ocr_bench.common);
  ocr_bench_cmd->add_option("--pages", ocr_bench.pages, "pages rendered and recognised")->capture_default_str();
  ocr_bench_cmd->add_option("--pipeline", ocr_bench.pipeline, "OCR pipeline folder, or its name under --models")
      ->capture_default_str();
  ocr_bench_cmd->add_option("--generated", ocr_bench.generated_dir,
                            "folder of generated models (conv_100mb, the switching part's second model); default: "
                            "generated_models beside this binary");
  ocr_bench_cmd->add_option("--render-script", ocr_bench.render_script, "the page renderer (Pillow)")
      ->capture_default_str();
  ocr_bench_cmd->add_flag("--json", ocr_bench.json, "print JSON (the only output format)");
  ocr_bench_cmd->add_option("--worker", ocr_bench.worker)->group("");
  ocr_bench_cmd->add_option("--worker-mode", ocr_bench.worker_mode)->group("");
  ocr_bench_cmd->add_option("--pages-dir", ocr_bench.pages_dir)->group("");
  auto* json_cmd = add_bench("json", "decoding a 4 MB JSON FP32 tensor: throughput and peak memory, beside a copy");
  ConcurrencyOptions concurrency;
  auto* concurrency_cmd = bench_cmd->add_subcommand(
      "concurrency", "1 to 16 concurrent clients under a capped arena: admission by memory against none and no cap");
  AddCommon(concurrency_cmd, &concurrency.common);
  concurrency_cmd->add_option("--model", concurrency.model, kModelHelp)->capture_default_str();
  concurrency_cmd->add_option("--size", concurrency.side, "input side in pixels")->capture_default_str();
  concurrency_cmd->add_option("--cap-bytes", concurrency.cap_bytes,
                              "the shared arena's cap (0 = 2.5 times one run's arena peak, measured first)")
      ->capture_default_str();
  concurrency_cmd->add_option("--rounds", concurrency.rounds, "rounds of the modes at each N (the median throughput kept)")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  concurrency_cmd->add_flag("--json", concurrency.json, "print JSON (the only output format)");
  concurrency_cmd->add_option("--worker", concurrency.worker)->group("");
  concurrency_cmd->add_option("--clients", concurrency.clients)->group("");

#endif

  CLI11_PARSE(app, argc, argv);
  if (*demo_cmd) return RunDemo(demo);
  if (*info_cmd) return RunInfo(info_common, info_model);
  if (*run_cmd) return RunImages(run);
  if (*ocr_cmd) return RunOcr(ocr);
  if (*serve_cmd) {
    serve.pool.wait_for_capacity = std::chrono::milliseconds(wait_ms);
    serve.service.queue_timeout = std::chrono::milliseconds(queue_timeout_ms);
    serve.service.sequences.idle_timeout = std::chrono::milliseconds(sequence_timeout_ms);
    serve.pool.admit_by_memory = !no_memory_admission;
    return Serve(serve);
  }
  if (*policy_cmd) {
    auto policy = PolicyFrom(policy_common);
    if (!policy.ok()) return Fail(policy.status());
    std::printf("%s\n", ebb::MemoryPolicyToJson(*policy).c_str());
    return 0;
  }
#ifndef EBB_NO_BENCHMARKS
  if (*overhead_cmd) return BenchOverhead(bench);
  if (*floor_cmd) return BenchFloor(bench);
  if (*release_cmd) return BenchRelease(bench);
  if (*loop_cmd) return BenchLoop(bench);
  if (*http_cmd) return BenchHttp(bench);
  if (*instructions_cmd) return BenchInstructions(bench);
#ifndef EBB_NO_GRPC
  if (*grpc_cmd) return BenchGrpc(bench);
  if (*modelmesh_cmd) return BenchModelMesh(modelmesh_bench);
  if (*stream_cmd) return BenchStream(bench);
#endif
  if (*switch_cmd) return BenchSwitch(bench);
  if (*sessions_cmd) return BenchSessions(bench);
  if (*footprint_cmd) return BenchFootprint(footprint);
  if (*json_cmd) return BenchJson(bench);
  if (*ocr_bench_cmd) return BenchOcr(ocr_bench);
  if (*concurrency_cmd) return BenchConcurrency(concurrency);
#endif
  return 1;
}
