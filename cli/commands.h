// The `ebb` subcommands other than `bench` (see bench.h).
#pragma once

#include <string>
#include <vector>

#include "common.h"
#include "ebb/image.h"
#include "ebb/model_pool.h"
#include "ebb/ocr.h"
#include "core/service.h"
#include "http/http_server.h"

namespace ebb::cli {

struct DemoOptions {
  CommonOptions common;
  int64_t size = 1536;
};
int RunDemo(const DemoOptions& options);

struct RunOptions {
  CommonOptions common;
  std::string model;  // as ResolveModel takes it: a model file, a model folder, or a name under --models
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;  // .png, or .jpg / .jpeg
  int jpeg_quality = kDefaultJpegQuality;
  int64_t tile = 0;      // 0 = the model folder's config (or no tiling)
  int64_t overlap = -1;  // -1 = the config's (or 8)
  std::string memory_report;
  std::string plot;
};
int RunImages(const RunOptions& options);

struct ServeOptions {
  CommonOptions common;
  // --release: the policy's release mode for the server ("" = the policy
  // file's when it sets one, else idle; see ServerPolicy in common.h).
  std::string release;
  std::string repository = "models";
  bool confine_links = false;  // refuse repository files linked out of it (server/core/repository.h)
  bool load_all = true;        // load every model at start-up
  bool load_on_demand = true;  // a request to an unloaded model loads it
  server::HttpOptions http;
  int grpc_port = 8001;        // 0 = no gRPC; -1 = any free port
  size_t grpc_threads = 32;    // workers for ModelInfer calls (server/grpc/inference_api.h)
  bool grpc_compressed_requests = false;  // server/grpc/grpc_server.h: GrpcOptions::compressed_requests
  server::ServiceOptions service;
  PoolOptions pool;
  // ModelMesh: serve mmesh.ModelRuntime on the gRPC port (off by default:
  // its runtimeStatus unloads every model).
  bool modelmesh = false;
  std::string model_root;  // loadModel paths must resolve under it; "" = the repository
  // KServe's single-model form: the model in `model_dir` (KServe mounts it at
  // /mnt/models) served as `model_name`, loaded at start; ready once loaded.
  std::string model_name;
  std::string model_dir;
};
int Serve(const ServeOptions& options);

struct OcrCliOptions {
  CommonOptions common;
  std::vector<std::string> images;
  std::string pipeline = "ocr";  // a pipeline folder, or its name under --models
  bool json = false;
  OcrOptions options;
};
int RunOcr(const OcrCliOptions& options);


}  // namespace ebb::cli
