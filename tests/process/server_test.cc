// Black-box tests of `ebb serve`: the real server process on a free loopback
// port, driven with a real HTTP client (cpp-httplib), results checked against
// an in-process run of the same models.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "ebb/runtime.h"
#include "ebb/tiler.h"
#include "external_data_model.h"
#include "http/protocol.h"
#include "server_process.h"
#include "test_util.h"

namespace ebb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kModels = EBB_MODELS_DIR;

// A repository of copies of the bundled models (tiled upscaler with small
// tiles) and one broken model.
std::string MakeRepository() {
  const fs::path root = fs::path(::testing::TempDir()) / ("ebb_repo_" + std::to_string(getpid()));
  fs::remove_all(root);
  for (const char* name : {"tiny", "mixed", "convnet", "waifu2x_scale2x"}) {
    fs::create_directories(root / name);
    fs::copy_file(kModels + "/" + name + "/model.onnx", root / name / "model.onnx");
  }
  std::ofstream(root / "waifu2x_scale2x" / "config.json")
      << R"({"kind": "image_to_image", "device": "cpu", "tile": {"size": 32, "overlap": 6}})";
  fs::create_directories(root / "broken");
  std::ofstream(root / "broken" / "model.onnx") << "not a model";
  // A link that leads out of the repository (refused: the server runs with --confine-links).
  const fs::path outside = root.string() + "_outside";
  fs::create_directories(outside / "escape");
  fs::copy_file(kModels + "/tiny/model.onnx", outside / "escape" / "model.onnx", fs::copy_options::overwrite_existing);
  fs::create_symlink(outside / "escape", root / "escape");
  return root.string();
}

void RemoveRepository(const std::string& repo) {
  fs::remove_all(repo);
  fs::remove_all(repo + "_outside");
}

json Input(const std::string& name, const Shape& shape, const char* type, json data) {
  return {{"name", name}, {"shape", shape}, {"datatype", type}, {"data", std::move(data)}};
}

json MixedRequest() {
  return {{"inputs",
           {Input("a", {2, 4}, "FP32", {1.5, 2, 3, 4, 5, 6, 7, 8}), Input("b", {2, 4}, "INT64", {1, 2, 3, 4, 5, 6, 7, 8}),
            Input("c", {2, 4}, "UINT8", {0, 1, 2, 3, 250, 251, 252, 253}),
            Input("flag", {2, 4}, "BOOL", {true, false, true, false, false, false, true, true})}}};
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repository_ = MakeRepository();
    server_ = new testing::ServerProcess();
    ASSERT_TRUE(server_->Start({"--repository", repository_, "--max-body-bytes", "8000000", "--confine-links"}));
    auto rt = Runtime::Create();
    ASSERT_TRUE(rt.ok());
    runtime_ = std::move(rt).value().release();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Stop(SIGTERM), 0);
    delete server_;
    delete runtime_;
    RemoveRepository(repository_);
  }

  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(60, 0);
    return c;
  }
  httplib::Result Post(const std::string& path, const std::string& body,
                       const std::string& type = "application/json") const {
    return Client().Post(path.c_str(), body, type.c_str());
  }
  static std::shared_ptr<Session> Local(const std::string& name) {
    auto s = runtime_->Load(repository_ + "/" + name + "/model.onnx", {.device = DeviceRequest::Cpu()});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return *s;
  }
  // The value of one sample of /metrics, or -1.
  double Metric(const std::string& sample) const {
    auto res = Client().Get("/metrics");
    if (!res) return -1;
    std::istringstream lines(res->body);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
    }
    return -1;
  }

  static inline std::string repository_;
  static inline testing::ServerProcess* server_ = nullptr;
  static inline Runtime* runtime_ = nullptr;
};

TEST_F(ServerTest, HealthAndMetadataEndpoints) {
  auto c = Client();
  auto live = c.Get("/v2/health/live");
  ASSERT_TRUE(live);
  EXPECT_EQ(live->status, 200);
  EXPECT_EQ(c.Get("/v2/health/ready")->status, 200);
  json server = json::parse(c.Get("/v2")->body);
  EXPECT_EQ(server["name"], "ebb");
  EXPECT_NE(server["extensions"].dump().find("binary_tensor_data"), std::string::npos);
  auto meta = c.Get("/v2/models/convnet");
  ASSERT_EQ(meta->status, 200);
  json m = json::parse(meta->body);
  EXPECT_EQ(m["inputs"][0]["name"], "x");
  EXPECT_EQ(m["inputs"][0]["datatype"], "FP32");
  EXPECT_EQ(m["inputs"][0]["shape"], json({-1, 3, -1, -1}));
  EXPECT_EQ(c.Get("/v2/models/convnet/ready")->status, 200);
  EXPECT_EQ(c.Get("/v2/models/nope/ready")->status, 404);
}

TEST_F(ServerTest, JsonInferenceMatchesAnInProcessRun) {
  auto res = Post("/v2/models/mixed/infer", MixedRequest().dump());
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  json out = json::parse(res->body);
  auto request = server::ParseInferRequest(MixedRequest().dump(), std::nullopt);
  ASSERT_TRUE(request.ok());
  auto local = Local("mixed")->Run(request->request.inputs);
  ASSERT_TRUE(local.ok());
  json expected = json::parse(
      server::EncodeInferResponse({"mixed", "1", "", std::move(local).value()}, request->binary).body);
  EXPECT_EQ(out["outputs"], expected["outputs"]);
  EXPECT_EQ(out["outputs"][0]["data"][0], 1.5 + 1 + 0);  // sum = a + b + c
}

TEST_F(ServerTest, BinaryInferenceMatchesBitwise) {
  Tensor x = testing::RandomTensor({1, 3, 24, 20}, 3);
  json header = {{"inputs", {{{"name", "x"}, {"shape", x.shape()}, {"datatype", "FP32"},
                               {"parameters", {{"binary_data_size", x.byte_size()}}}}}},
                 {"outputs", {{{"name", "y"}, {"parameters", {{"binary_data", true}}}}}}};
  const std::string json_part = header.dump();
  std::string body = json_part + std::string(reinterpret_cast<const char*>(x.data()), x.byte_size());
  httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(json_part.size())}};
  auto res = Client().Post("/v2/models/convnet/infer", headers, body, "application/octet-stream");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const size_t json_len = std::stoul(res->get_header_value("Inference-Header-Content-Length"));
  json out = json::parse(res->body.substr(0, json_len));
  EXPECT_EQ(out["outputs"][0]["parameters"]["binary_data_size"], x.byte_size());
  auto local = Local("convnet")->Run(testing::One("x", x.Clone()));
  ASSERT_TRUE(local.ok());
  const Tensor& y = (*local)[0].tensor;
  ASSERT_EQ(res->body.size() - json_len, y.byte_size());
  EXPECT_EQ(0, std::memcmp(res->body.data() + json_len, y.data(), y.byte_size()));
}

// The server's page faults (minor and major) so far, from /proc/<pid>/stat; -1 when unreadable.
int64_t PageFaults(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  int64_t minflt = -1, majflt = -1;
  // After the name: state(3) ppid pgrp session tty_nr tpgid flags minflt(10) cminflt majflt(12).
  for (int i = 3; i <= 12 && fields >> field; ++i) {
    if (i == 10) minflt = std::stoll(field);
    if (i == 12) majflt = std::stoll(field);
  }
  return minflt < 0 || majflt < 0 ? -1 : minflt + majflt;
}

// An image-sized binary request ([1,3,224,224] FP32 in and out, 588 KiB each) on its way through
// the server: the body is read from the socket into one buffer that a body of that size gave back
// (warm), its input used where it lies there, and the binary output sent from the output tensor
// (warm) with scatter/gather writes. Each copy of those bytes into fresh memory would fault in 147
// pages (glibc maps buffers of 128 KiB and more afresh): the body string and the reply string,
// before, cost ~296 faults a request. A bound well under one such copy fails if one comes back.
// The server keeps its memory between requests as `ebb serve` does by default (release idle), with
// idle_release_ms at its most: no idle release in the gaps of a loaded machine, which would give
// the model's arena and the kept buffers back, to be faulted in again.
TEST(ServerCopyTest, AnImageSizedBinaryRequestCostsLessThanOneCopyInPageFaults) {
  if (!testing::kFaultBoundsHold) GTEST_SKIP() << "page faults skipped: ThreadSanitizer's shadow memory faults too";
  const std::string repository = MakeRepository();
  const std::string policy = ::testing::TempDir() + "/ebb_copy_policy_" + std::to_string(getpid()) + ".json";
  std::ofstream(policy) << R"({"idle_release_ms": 600000})";
  testing::ServerProcess server;
  ASSERT_TRUE(server.Start({"--repository", repository, "--policy", policy, "--release", "idle"}));
  Tensor x = testing::RandomTensor({1, 3, 224, 224}, 5);
  json header = {{"inputs", {{{"name", "x"}, {"shape", x.shape()}, {"datatype", "FP32"},
                               {"parameters", {{"binary_data_size", x.byte_size()}}}}}},
                 {"outputs", {{{"name", "y"}, {"parameters", {{"binary_data", true}}}}}}};
  const std::string json_part = header.dump();
  const std::string body = json_part + std::string(reinterpret_cast<const char*>(x.data()), x.byte_size());
  const httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(json_part.size())}};
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);
  client.set_keep_alive(true);
  auto post = [&] { return client.Post("/v2/models/convnet/infer", headers, body, "application/octet-stream"); };
  for (int i = 0; i < 10; ++i) {  // loads the model, warms the kept buffers
    auto res = post();
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
  }
  constexpr int kRequests = 50;
  const int64_t before = PageFaults(server.pid());
  ASSERT_GE(before, 0);
  std::string reply, json_length;
  for (int i = 0; i < kRequests; ++i) {
    auto res = post();
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    if (i + 1 == kRequests) {
      reply = std::move(res->body);
      json_length = res->get_header_value("Inference-Header-Content-Length");
    }
  }
  const double per_request = static_cast<double>(PageFaults(server.pid()) - before) / kRequests;
  EXPECT_LT(per_request, 40) << "page faults per request; one copy of the 588 KiB into fresh memory is 147";
  EXPECT_EQ(server.Stop(SIGTERM), 0);
  // And the answer is still the model's.
  auto runtime = Runtime::Create();
  ASSERT_TRUE(runtime.ok());
  auto session = (*runtime)->Load(repository + "/convnet/model.onnx", {.device = DeviceRequest::Cpu()});
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  RemoveRepository(repository);
  auto local = (*session)->Run(testing::One("x", x.Clone()));
  ASSERT_TRUE(local.ok());
  const Tensor& y = (*local)[0].tensor;
  const size_t json_len = std::stoul(json_length);
  ASSERT_EQ(reply.size() - json_len, y.byte_size());
  EXPECT_EQ(0, std::memcmp(reply.data() + json_len, y.data(), y.byte_size()));
}

TEST_F(ServerTest, TiledImageModelRunsTheWholeOperationAndReleasesOnce) {
  const std::string releases = R"(ebb_releases_total{model="waifu2x_scale2x"})";
  const double before = std::max(0.0, Metric(releases));
  Tensor batch = testing::RandomTensor({2, 3, 40, 36}, 9);
  json request = {{"inputs", {Input("x", batch.shape(), "FP32", json(std::vector<float>(batch.values<float>().begin(),
                                                                                           batch.values<float>().end())))}}};
  auto res = Post("/v2/models/waifu2x_scale2x/infer", request.dump());
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  json out = json::parse(res->body);
  EXPECT_EQ(out["outputs"][0]["shape"], json({2, 3, 80, 72}));
  EXPECT_EQ(Metric(releases), before + 1) << "one release per request, after its last tile";
  // 40x36 with cores of 20: 2x2 tiles per frame, 2 frames.
  EXPECT_EQ(Metric(R"(ebb_operation_runs_planned{model="waifu2x_scale2x"})"), 8);
  EXPECT_EQ(Metric(R"(ebb_operation_runs_done{model="waifu2x_scale2x"})"), 8);
  // Same as the operation run in-process.
  std::vector<Tensor> frames;
  frames.push_back(testing::RandomTensor({1, 3, 40, 36}, 0));
  std::memcpy(frames[0].data(), batch.data() + batch.byte_size() / 2, batch.byte_size() / 2);
  auto local = RunTiled(*runtime_, Local("waifu2x_scale2x"), frames, {.tile = 32, .overlap = 6});
  ASSERT_TRUE(local.ok());
  auto v = (*local)[0].values<float>();
  const json& data = out["outputs"][0]["data"];
  const size_t offset = v.size();
  for (size_t i = 0; i < v.size(); i += 97) ASSERT_FLOAT_EQ(data[offset + i].get<float>(), v[i]) << i;
}

TEST_F(ServerTest, LoadUnloadReloadAndOnDemandLoad) {
  auto c = Client();
  const std::string loads = R"(ebb_model_loads_total{model="tiny"})";
  const double loads_before = Metric(loads);
  ASSERT_EQ(Post("/v2/repository/models/tiny/unload", "")->status, 200);
  EXPECT_EQ(c.Get("/v2/models/tiny/ready")->status, 400);
  json index = json::parse(Post("/v2/repository/index", "")->body);
  bool seen = false;
  for (const json& m : index) {
    if (m["name"] == "tiny") {
      EXPECT_EQ(m["state"], "UNAVAILABLE");
      seen = true;
    }
    if (m["name"] == "broken") {
      EXPECT_EQ(m["state"], "UNAVAILABLE");
    }
  }
  EXPECT_TRUE(seen);
  const std::string on_demand = R"(ebb_model_on_demand_loads_total{model="tiny"})";
  const double on_demand_before = std::max(0.0, Metric(on_demand));
  ASSERT_EQ(Post("/v2/repository/models/tiny/load", "")->status, 200);
  EXPECT_EQ(c.Get("/v2/models/tiny/ready")->status, 200);
  EXPECT_EQ(Metric(loads), loads_before + 1);
  EXPECT_EQ(std::max(0.0, Metric(on_demand)), on_demand_before) << "an explicit load is not on demand";
  // Loading a loaded model again keeps its cached session: no new ORT session,
  // but the repository counts the load request.
  ASSERT_EQ(Post("/v2/repository/models/tiny/unload", "")->status, 200);
  json request = {{"inputs", {Input("x", {1, 64}, "FP32", json(std::vector<float>(64, 0.5f)))}}};
  auto res = Post("/v2/models/tiny/infer", request.dump());
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(c.Get("/v2/models/tiny/ready")->status, 200) << "a request loads an unloaded model on demand";
  EXPECT_EQ(Metric(loads), loads_before + 2);
  EXPECT_EQ(Metric(on_demand), on_demand_before + 1);
}

TEST_F(ServerTest, MetricsParseAndTheArenaGaugesShowTheRelease) {
  Tensor x = testing::RandomTensor({1, 3, 384, 384}, 4);
  json header = {{"inputs", {{{"name", "x"}, {"shape", x.shape()}, {"datatype", "FP32"},
                               {"parameters", {{"binary_data_size", x.byte_size()}}}}}},
                 {"parameters", {{"binary_data_output", true}}}};
  const std::string json_part = header.dump();
  const double releases = std::max(0.0, Metric(R"(ebb_releases_total{model="convnet"})"));
  auto res = Client().Post("/v2/models/convnet/infer", {{"Inference-Header-Content-Length", std::to_string(json_part.size())}},
                           json_part + std::string(reinterpret_cast<const char*>(x.data()), x.byte_size()),
                           "application/octet-stream");
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(Metric(R"(ebb_releases_total{model="convnet"})"), releases + 1);
  const double peak = Metric(R"(ebb_arena_peak_in_use_bytes{arena="cpu:shared"})");
  const double reserved = Metric(R"(ebb_arena_reserved_bytes{arena="cpu:shared"})");
  EXPECT_GT(peak, 16.0 * 384 * 384 * 4) << "the run's 16-channel activations were in the arena";
  EXPECT_LT(reserved, 1 << 20) << "and went back after the run";
  EXPECT_GT(Metric("ebb_process_resident_memory_bytes"), 0);

  auto text = Client().Get("/metrics");
  const std::string path = ::testing::TempDir() + "/ebb_metrics.txt";
  std::ofstream(path) << text->body;
  if (std::system("command -v promtool > /dev/null") != 0) GTEST_SKIP() << "promtool not installed";
  FILE* p = popen(("promtool check metrics < " + path + " 2>&1").c_str(), "r");
  std::string said;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) said += buf;
  EXPECT_EQ(pclose(p), 0) << said;
  EXPECT_EQ(said, "");
}

struct BadRequest {
  const char* what;
  std::string path;
  std::string body;
  httplib::Headers headers;
  int status;
  const char* mentions;
};

TEST_F(ServerTest, BadRequestsGetClearErrorsAndTheServerKeepsServing) {
  const std::string x12 = std::string(12 * 4, '\0');
  const std::string binary_header =
      R"({"inputs":[{"name":"x","shape":[1,3,2,2],"datatype":"FP32","parameters":{"binary_data_size":40}}]})";
  const std::vector<BadRequest> cases = {
      {"malformed JSON", "/v2/models/mixed/infer", "{\"inputs\": [", {}, 400, "JSON"},
      {"unknown model", "/v2/models/nope/infer", MixedRequest().dump(), {}, 404, "unknown model 'nope'"},
      {"a path as model name", "/v2/models/..%2F..%2Fetc/infer", MixedRequest().dump(), {}, 400, "invalid model name"},
      {"a bad percent-encoding", "/v2/models/ti%zzny/infer", MixedRequest().dump(), {}, 400, "percent-encoding"},
      {"an unknown endpoint", "/v2/modelz/tiny/infer", MixedRequest().dump(), {}, 404, "no such endpoint"},
      {"a hidden name", "/v2/models/..tiny/infer", MixedRequest().dump(), {}, 400, "invalid model name"},
      {"a link out of the repository", "/v2/models/escape/infer", MixedRequest().dump(), {}, 400,
       "resolves outside the repository"},
      {"wrong input name", "/v2/models/tiny/infer",
       json{{"inputs", {Input("z", {1, 64}, "FP32", json(std::vector<float>(64)))}}}.dump(), {}, 400, "no input named 'z'"},
      {"wrong datatype", "/v2/models/tiny/infer",
       json{{"inputs", {Input("x", {1, 64}, "INT32", json(std::vector<int>(64)))}}}.dump(), {}, 400, "must be FP32"},
      {"wrong shape", "/v2/models/tiny/infer",
       json{{"inputs", {Input("x", {1, 32}, "FP32", json(std::vector<float>(32)))}}}.dump(), {}, 400, "[1,64]"},
      {"data length not matching the shape", "/v2/models/tiny/infer",
       json{{"inputs", {Input("x", {1, 64}, "FP32", json(std::vector<float>(63)))}}}.dump(), {}, 400, "63"},
      {"inconsistent binary lengths", "/v2/models/convnet/infer",
       binary_header + x12, {{"Inference-Header-Content-Length", std::to_string(binary_header.size())}}, 400,
       "binary_data_size"},
      {"body over the size limit", "/v2/models/tiny/infer", std::string(9000000, ' '), {}, 413, "limit"},
      {"model that failed to load", "/v2/models/broken/infer", MixedRequest().dump(), {}, 503, "failed to load"},
  };
  for (const BadRequest& c : cases) {
    auto res = Client().Post(c.path.c_str(), c.headers, c.body, "application/json");
    ASSERT_TRUE(res) << c.what;
    EXPECT_EQ(res->status, c.status) << c.what << ": " << res->body;
    json err = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(err.is_object() && err.contains("error")) << c.what << ": " << res->body;
    EXPECT_NE(err["error"].get<std::string>().find(c.mentions), std::string::npos) << c.what << ": " << res->body;
    auto good = Post("/v2/models/mixed/infer", MixedRequest().dump());
    ASSERT_TRUE(good);
    EXPECT_EQ(good->status, 200) << "after " << c.what;
  }
}

TEST_F(ServerTest, AKnownPathWithTheWrongMethodIs405) {
  httplib::Client c = Client();
  auto get = c.Get("/v2/models/tiny/infer");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405) << get->body;
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  EXPECT_NE(get->body.find("method not allowed: GET /v2/models/tiny/infer"), std::string::npos) << get->body;
  auto post = c.Post("/v2/health/live", "", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405) << post->body;
  EXPECT_EQ(post->get_header_value("Allow"), "GET");
  auto good = Post("/v2/models/mixed/infer", MixedRequest().dump());
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200);
}

TEST_F(ServerTest, ConcurrentClientsOnTwoModels) {
  json tiny = {{"inputs", {Input("x", {1, 64}, "FP32", json(std::vector<float>(64, 0.25f)))}}};
  const std::string expected_tiny = Post("/v2/models/tiny/infer", tiny.dump())->body;
  const std::string expected_mixed = Post("/v2/models/mixed/infer", MixedRequest().dump())->body;
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 15; ++i) {
        auto res = t % 2 ? Post("/v2/models/tiny/infer", tiny.dump()) : Post("/v2/models/mixed/infer", MixedRequest().dump());
        if (!res || res->status != 200 || res->body != (t % 2 ? expected_tiny : expected_mixed)) ++wrong;
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(ServerTest, ASlowClientDoesNotBlockOthers) {
  // A client that sends half a request and then nothing.
  httplib::Client slow("127.0.0.1", server_->port());
  std::thread stalled([&] {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      const char partial[] = "POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"inp";
      (void)!write(fd, partial, sizeof partial - 1);
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    close(fd);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Client().Get("/v2/health/ready")->status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  stalled.join();
}

TEST_F(ServerTest, ClientsThatDisconnectMidRequestLoseNothingForOthers) {
  // Clients that send a large inference request and vanish before the reply.
  Tensor x = testing::RandomTensor({1, 3, 512, 512}, 8);
  json header = {{"inputs", {{{"name", "x"}, {"shape", x.shape()}, {"datatype", "FP32"},
                               {"parameters", {{"binary_data_size", x.byte_size()}}}}}}};
  const std::string json_part = header.dump();
  const std::string request = "POST /v2/models/convnet/infer HTTP/1.1\r\nHost: x\r\nContent-Type: "
                              "application/octet-stream\r\nInference-Header-Content-Length: " +
                              std::to_string(json_part.size()) + "\r\nContent-Length: " +
                              std::to_string(json_part.size() + x.byte_size()) + "\r\n\r\n" + json_part;
  for (int i = 0; i < 3; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    (void)!write(fd, request.data(), request.size());
    (void)!write(fd, x.data(), i == 0 ? x.byte_size() / 2 : x.byte_size());  // the first one leaves mid-body
    close(fd);
  }
  for (int i = 0; i < 5; ++i) {
    auto res = Post("/v2/models/mixed/infer", MixedRequest().dump());
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
  }
  EXPECT_EQ(Client().Get("/v2/health/ready")->status, 200);
}

// --- Separate servers: queue limits and shutdown -----------------------------------

std::string BigConvnetRequest(int side) {
  Tensor x = testing::RandomTensor({1, 3, side, side}, 1);
  json header = {{"inputs", {{{"name", "x"}, {"shape", x.shape()}, {"datatype", "FP32"},
                               {"parameters", {{"binary_data_size", x.byte_size()}}}}}},
                 {"parameters", {{"binary_data_output", true}}}};
  return header.dump() + "\n" + std::string(reinterpret_cast<const char*>(x.data()), x.byte_size());
}

// Waits until the server reports an inference running.
void WaitUntilRunning(int port) {
  httplib::Client probe("127.0.0.1", port);
  for (int i = 0; i < 1000; ++i) {
    auto m = probe.Get("/metrics");
    if (m && m->body.find("\nebb_inference_running 1\n") != std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "no inference started";
}

httplib::Result PostBig(int port, const std::string& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  const size_t json_len = body.find('\n') + 1;
  return c.Post("/v2/models/convnet/infer", {{"Inference-Header-Content-Length", std::to_string(json_len)}}, body,
                "application/octet-stream");
}

TEST(ServerLimitsTest, AFullQueueAnswers503AndTheServerRecovers) {
  const std::string repo = MakeRepository();
  testing::ServerProcess server;
  ASSERT_TRUE(server.Start({"--repository", repo, "--workers", "1", "--queue", "0"}));
  const std::string big = BigConvnetRequest(2048);
  std::thread first([&] { EXPECT_EQ(PostBig(server.port(), big)->status, 200); });
  WaitUntilRunning(server.port());  // the first request holds the only worker
  auto refused = PostBig(server.port(), BigConvnetRequest(16));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_NE(refused->body.find("server busy"), std::string::npos) << refused->body;
  first.join();
  EXPECT_EQ(PostBig(server.port(), BigConvnetRequest(16))->status, 200);
  EXPECT_EQ(server.Stop(SIGINT), 0);
  RemoveRepository(repo);
}

std::string SpinRequest(int64_t iterations) {
  return json{{"inputs", {Input("n", {1}, "INT64", {iterations})}}}.dump();
}

// Round four: requests went to the HTTP worker pool's unbounded queue before the core's admission
// saw them, so with few threads nothing was refused (100 requests at --queue 64: no 503, 99
// waited), and metadata and metrics waited behind the inferences (over 3 s) while health answered.
TEST(ServerLimitsTest, TheHandOffIsBoundedByTheQueueAndControlRequestsNeverWaitBehindInferences) {
  const std::string repo = MakeRepository();
  fs::create_directories(fs::path(repo) / "spin");
  fs::copy_file(std::string(EBB_TEST_MODELS_DIR) + "/spin/model.onnx", fs::path(repo) / "spin" / "model.onnx");
  testing::ServerProcess server;
  // Two HTTP threads: fewer than the requests, as under a burst.
  ASSERT_TRUE(server.Start({"--repository", repo, "--workers", "1", "--queue", "4", "--http-threads", "2"}));
  auto post = [&](int64_t n) {
    httplib::Client c("127.0.0.1", server.port());
    c.set_read_timeout(120, 0);
    return c.Post("/v2/models/spin/infer", SpinRequest(n), "application/json");
  };
  ASSERT_EQ(post(1)->status, 200);  // loaded
  std::thread first([&] { EXPECT_EQ(post(2'000'000)->status, 200); });  // seconds: holds the only worker
  WaitUntilRunning(server.port());
  constexpr int kMore = 12;
  std::atomic<int> ok{0}, busy{0};
  std::vector<std::thread> more;
  for (int i = 0; i < kMore; ++i) {
    more.emplace_back([&] {
      auto res = post(1);
      ASSERT_TRUE(res);
      if (res->status == 200) ++ok;
      if (res->status == 503) {
        EXPECT_NE(res->body.find(R"({"error":"server busy: 1 inferences running and 4 waiting; retry later"})"),
                  std::string::npos)
            << res->body;
        ++busy;
      }
    });
  }
  // Wait until the refused ones are answered; the rest wait in line behind the long run.
  for (int i = 0; i < 500 && busy < kMore - 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(busy.load(), kMore - 4) << "at most --workers + --queue inferences handed off at once";
  // Control requests are answered at once, with both HTTP threads taken by inferences.
  httplib::Client control("127.0.0.1", server.port());
  for (const char* path : {"/metrics", "/v2/models/spin", "/v2", "/v2/models/spin/config", "/v2/models/stats"}) {
    const auto start = std::chrono::steady_clock::now();
    auto res = control.Get(path);
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 200) << path;
    EXPECT_LT(took, std::chrono::milliseconds(500)) << path << " waited behind the inferences";
  }
  auto index = control.Post("/v2/repository/index", "", "application/json");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  auto metrics = control.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("\nebb_inference_running 1\n"), std::string::npos) << "the long run still runs";
  first.join();
  for (std::thread& t : more) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_EQ(post(1)->status, 200) << "the places are given back";
  EXPECT_EQ(server.Stop(SIGINT), 0);
  RemoveRepository(repo);
}

// SIGHUP as SIGTERM: a closed terminal or a supervisor's reload signal must not kill requests in flight.
TEST(ServerShutdownTest, SigtermAndSighupLetRequestsInFlightFinishThenExitZero) {
  const std::string repo = MakeRepository();
  for (int sig : {SIGTERM, SIGHUP}) {
    SCOPED_TRACE(strsignal(sig));
    testing::ServerProcess server;
    ASSERT_TRUE(server.Start({"--repository", repo}));
    const std::string big = BigConvnetRequest(1536);
    std::atomic<int> status{0};
    std::thread in_flight([&] {
      auto res = PostBig(server.port(), big);
      status = res ? res->status : -1;
    });
    WaitUntilRunning(server.port());
    EXPECT_EQ(server.Stop(sig), 0);
    in_flight.join();
    EXPECT_EQ(status.load(), 200) << "the request in flight was answered before the exit";
    EXPECT_NE(server.Output("").find(sig == SIGHUP ? "SIGHUP received" : "SIGTERM received"), std::string::npos);
  }
  RemoveRepository(repo);
}

}  // namespace
}  // namespace ebb

namespace ebb {
namespace {

// A repository of three convnet variants (distinct bytes: distinct sessions).
std::string MakeVariantRepository() {
  const fs::path root = fs::path(::testing::TempDir()) / ("ebb_variants_" + std::to_string(getpid()));
  fs::remove_all(root);
  for (const char* name : {"a", "b", "c"}) {
    fs::create_directories(root / name);
    testing::WriteModelVariant(kModels + "/convnet/model.onnx", (root / name / "model.onnx").string(),
                               std::string("variant ") + name);
  }
  return root.string();
}

double MetricOf(httplib::Client& c, const std::string& sample) {
  auto res = c.Get("/metrics");
  std::istringstream lines(res ? res->body : "");
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
  }
  return 0;
}

// POSTs a binary [1,3,side,side] image to `model`; returns the HTTP status.
int PostImage(httplib::Client& c, const std::string& model, int side, std::optional<int64_t> keep_alive = {}) {
  Tensor x = testing::RandomTensor({1, 3, side, side}, 2);
  json header = {{"inputs", {{{"name", "x"}, {"shape", x.shape()}, {"datatype", "FP32"},
                               {"parameters", {{"binary_data_size", x.byte_size()}}}}}},
                 {"parameters", {{"binary_data_output", true}}}};
  if (keep_alive) header["parameters"]["keep_alive"] = *keep_alive;
  const std::string json_part = header.dump();
  auto res = c.Post(("/v2/models/" + model + "/infer").c_str(),
                    {{"Inference-Header-Content-Length", std::to_string(json_part.size())}},
                    json_part + std::string(reinterpret_cast<const char*>(x.data()), x.byte_size()),
                    "application/octet-stream");
  return res ? res->status : -1;
}

TEST(ServerBudgetTest, ModelsSwitchWithinTheBudgetAndTheIndexShowsStatesAndCharges) {
  const std::string repo = MakeVariantRepository();
  // 768x768: ~100 MiB of transient memory per run, far above what loading costs.
  constexpr int kSide = 768;
  int64_t charge = 0;
  {
    testing::ServerProcess unbounded;
    // Admission by memory off: a charge then holds the transient peak, which is nearly all of the
    // convnet's (with it on, runs reserve it while they run: ServerAdmissionTest).
    ASSERT_TRUE(unbounded.Start({"--repository", repo, "--no-load", "--no-memory-admission"}));
    httplib::Client c("127.0.0.1", unbounded.port());
    c.set_read_timeout(60, 0);
    for (const char* m : {"a", "b", "c"}) ASSERT_EQ(PostImage(c, m, kSide), 200);
    for (const json& m : json::parse(c.Post("/v2/repository/index", "", "application/json")->body)) {
      EXPECT_EQ(m["state"], "READY");
      charge = std::max(charge, m["charge_bytes"].get<int64_t>());
    }
    EXPECT_EQ(unbounded.Stop(), 0);
  }
  ASSERT_GT(charge, 50 << 20) << "a 768x768 convnet run needs about 100 MiB";
  const int64_t budget = charge * 5 / 2;
  testing::ServerProcess server;
  ASSERT_TRUE(server.Start({"--repository", repo, "--no-load", "--memory-budget", std::to_string(budget),
                            "--no-memory-admission"}));
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(60, 0);
  for (int round = 0; round < 3; ++round) {
    for (const char* m : {"a", "b", "c"}) {
      ASSERT_EQ(PostImage(c, m, kSide), 200);
      EXPECT_LE(MetricOf(c, R"(ebb_memory_budget_used_bytes{device="cpu"})"), budget);
    }
  }
  int ready = 0;
  for (const json& m : json::parse(c.Post("/v2/repository/index", "", "application/json")->body)) {
    ready += m["state"] == "READY";
    EXPECT_GT(m["charge_bytes"].get<int64_t>(), 0);
  }
  EXPECT_EQ(ready, 2) << "the budget holds two of the three";
  EXPECT_EQ(MetricOf(c, R"(ebb_memory_budget_bytes{device="cpu"})"), budget);
  EXPECT_GE(MetricOf(c, R"(ebb_model_evictions_total{model="a",reason="budget"})"), 2);
  EXPECT_GE(MetricOf(c, R"(ebb_model_on_demand_loads_total{model="a"})"), 3);
  EXPECT_GE(MetricOf(c, "ebb_model_switch_seconds_count"), 7);

  // keep_alive 0 on a request unloads its model right after it.
  ASSERT_EQ(PostImage(c, "a", 64, 0), 200);
  EXPECT_EQ(c.Get("/v2/models/a/ready")->status, 400);
  EXPECT_GE(MetricOf(c, R"(ebb_model_evictions_total{model="a",reason="keep_alive"})"), 1);
  EXPECT_EQ(server.Stop(), 0);
  fs::remove_all(repo);
}

// ---------------------------------------------------------------------------
// What `ebb serve` prints at start-up, and the version it reports

// A repository of copies of the named bundled models, plus `broken` when asked.
std::string MakeRepositoryOf(const std::string& tag, const std::vector<std::string>& models, bool broken = false) {
  const fs::path root = fs::path(::testing::TempDir()) / ("ebb_" + tag + "_" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  for (const std::string& name : models) {
    fs::create_directories(root / name);
    fs::copy_file(kModels + "/" + name + "/model.onnx", root / name / "model.onnx");
  }
  if (broken) {
    fs::create_directories(root / "broken");
    std::ofstream(root / "broken" / "model.onnx") << "not a model";
  }
  return root.string();
}

// The inference request of the start-up hint, as printed: the path of its URL
// and the body between the single quotes of -d.
struct PrintedRequest {
  std::string model, path, body;
};

std::optional<PrintedRequest> PrintedHint(const std::string& output, int port) {
  // One line: curl -s http://127.0.0.1:PORT/v2/models/M/infer -H 'Content-Type: application/json' -d 'BODY'
  const std::string url = "curl -s http://127.0.0.1:" + std::to_string(port);
  const size_t line = output.find(url + "/v2/models/");
  if (line == std::string::npos) return std::nullopt;
  const size_t path = line + url.size(), model = path + 11, infer = output.find("/infer ", model);
  const std::string flags = "/infer -H 'Content-Type: application/json' -d '";
  if (infer == std::string::npos || output.compare(infer, flags.size(), flags) != 0) return std::nullopt;
  const size_t body = infer + flags.size(), close = output.find('\'', body);
  if (close == std::string::npos || output.find('\n', path) < close) return std::nullopt;
  return PrintedRequest{output.substr(model, infer - model), output.substr(path, infer + 6 - path),
                        output.substr(body, close - body)};
}

// Checks the hint of a server on `repo`: it names `expected`, its inputs are
// the model's own (names, datatypes, and shapes that fit the declared ones),
// and its request succeeds as printed.
void ExpectWorkingHint(const std::string& repo, const std::string& expected, const Shape& expected_shape) {
  testing::ServerProcess server;
  ASSERT_TRUE(server.Start({"--repository", repo}));
  const std::string output = server.Output("| grep ebb_arena");
  std::optional<PrintedRequest> hint = PrintedHint(output, server.port());
  ASSERT_TRUE(hint) << output;
  EXPECT_EQ(hint->model, expected) << output;
  EXPECT_TRUE(fs::is_regular_file(fs::path(repo) / hint->model / "model.onnx")) << "a model the repository has";
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(60, 0);
  auto meta = c.Get(("/v2/models/" + hint->model).c_str());
  ASSERT_TRUE(meta && meta->status == 200);
  const json declared = json::parse(meta->body)["inputs"];
  const json sent = json::parse(hint->body)["inputs"];
  ASSERT_EQ(sent.size(), declared.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(sent[i]["name"], declared[i]["name"]);
    EXPECT_EQ(sent[i]["datatype"], declared[i]["datatype"]);
    const Shape shape = sent[i]["shape"].get<Shape>(), wanted = declared[i]["shape"].get<Shape>();
    ASSERT_EQ(shape.size(), wanted.size());
    for (size_t d = 0; d < shape.size(); ++d) EXPECT_TRUE(wanted[d] < 0 ? shape[d] > 0 : shape[d] == wanted[d]);
  }
  EXPECT_EQ(sent[0]["shape"].get<Shape>(), expected_shape);
  auto reply = c.Post(hint->path.c_str(), hint->body, "application/json");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200) << reply->body;
  EXPECT_FALSE(json::parse(reply->body)["outputs"].empty());
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServerStartupTest, TheHintUsesTheSmallestLoadedModelOfTheRepositoryAndWorks) {
  const std::string repo = MakeRepositoryOf("hint", {"tiny", "convnet"});  // no `mixed`
  ExpectWorkingHint(repo, "tiny", {1, 64});
  fs::remove_all(repo);
}

TEST(ServerStartupTest, TheHintMakesDynamicDimsConcrete) {
  const std::string repo = MakeRepositoryOf("hint_dynamic", {"convnet"}, /*broken=*/true);
  ExpectWorkingHint(repo, "convnet", {1, 3, 32, 32});  // declared [N,3,H,W]
  fs::remove_all(repo);
}

TEST(ServerStartupTest, NoLoadableModelGivesNoInferenceHintButOneThatWorks) {
  const std::string repo = MakeRepositoryOf("hint_none", {}, /*broken=*/true);
  testing::ServerProcess server;
  ASSERT_TRUE(server.Start({"--repository", repo}));
  const std::string output = server.Output("| grep ebb_arena");
  EXPECT_EQ(output.find("/infer"), std::string::npos) << output;
  ASSERT_NE(output.find("curl -s -d '' http://127.0.0.1:" + std::to_string(server.port()) + "/v2/repository/index"),
            std::string::npos)
      << output;
  httplib::Client c("127.0.0.1", server.port());
  auto index = c.Post("/v2/repository/index", "", "application/x-www-form-urlencoded");  // what curl -d '' sends
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_NE(index->body.find("broken"), std::string::npos) << index->body;
  EXPECT_EQ(server.Stop(), 0);
  fs::remove_all(repo);
}

TEST(ServerStartupTest, TheServerReportsTheVersionEbbPrints) {
  FILE* pipe = popen((std::string(EBB_BINARY) + " --version").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char line[256] = {};
  ASSERT_NE(fgets(line, sizeof line, pipe), nullptr);
  EXPECT_EQ(pclose(pipe), 0);
  std::string first(line);
  if (!first.empty() && first.back() == '\n') first.pop_back();
  ASSERT_EQ(first.rfind("ebb ", 0), 0u) << first;
  const std::string version = first.substr(4);
  EXPECT_EQ(version, EBB_PROJECT_VERSION);

  const std::string repo = MakeRepositoryOf("version", {"tiny"});
  testing::ServerProcess server;
  ASSERT_TRUE(server.Start({"--repository", repo}));
  httplib::Client c("127.0.0.1", server.port());
  auto metadata = c.Get("/v2");
  ASSERT_TRUE(metadata && metadata->status == 200);
  EXPECT_EQ(json::parse(metadata->body)["version"], version);
  EXPECT_EQ(server.Stop(), 0);
  fs::remove_all(repo);
}

// ---------------------------------------------------------------------------
// Models with external data (issue 18): new weights beside the same model.onnx
// are served after a reload and after a restart, with the optimized-model
// cache on; weights that are missing or lead out of the model's folder are
// refused with a clear error and the server keeps serving.

// The first output of `model` (version `version` when not empty) for an input of ones; {} on failure.
std::vector<float> InferOnes(httplib::Client& c, const std::string& model, const std::string& version = "") {
  const json request = {{"inputs", {Input("x", {1, 64}, "FP32", json(std::vector<float>(64, 1.f)))}}};
  const std::string path = "/v2/models/" + model + (version.empty() ? "" : "/versions/" + version) + "/infer";
  auto res = c.Post(path.c_str(), request.dump(), "application/json");
  if (!res || res->status != 200) {
    ADD_FAILURE() << path << ": " << (res ? res->body : "no reply");
    return {};
  }
  return json::parse(res->body)["outputs"][0]["data"].get<std::vector<float>>();
}

size_t CacheEntries(const fs::path& cache) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(cache)) n += e.path().extension() == ".ort";
  return n;
}

TEST(ServerExternalDataTest, NewWeightsAreServedAfterAReloadAndARestartWithTheCacheOn) {
  const fs::path root = fs::path(::testing::TempDir()) / ("ebb_ext_repo_" + std::to_string(getpid()));
  const fs::path cache = root.string() + "_cache", outside = root.string() + "_outside.bin";
  fs::remove_all(root);
  fs::remove_all(cache);
  testing::WriteMatMulModel(root / "ext", 1.f);
  // Two versions with the same model.onnx and their own weights: two models.
  testing::WriteMatMulModel(root / "vext" / "1", 1.f);
  testing::WriteMatMulModel(root / "vext" / "2", 2.f);
  std::ofstream(root / "vext" / "config.json") << R"({"versions": [1, 2]})";
  testing::WriteMatMulWeights(outside, 1.f);
  testing::WriteMatMulModel(root / "missing", 1.f, "weights.bin", /*write_weights=*/false);
  testing::WriteMatMulModel(root / "dotdot", 1.f, "../../" + outside.filename().string(), false);
  testing::WriteMatMulModel(root / "absolute", 1.f, outside.string(), false);
  fs::create_directories(root / "link");
  fs::create_symlink(outside, root / "link" / "weights.bin");
  testing::WriteMatMulModel(root / "link", 1.f, "weights.bin", false);
  const std::vector<float> k64(64, 64.f), k128(64, 128.f), k192(64, 192.f);
  // The server's optimized-model cache: on (the default), in a folder of this test's own.
  const char* saved = std::getenv("EBB_CACHE_DIR");
  const std::string saved_dir = saved ? saved : "";
  setenv("EBB_CACHE_DIR", cache.c_str(), 1);
  {
    testing::ServerProcess server;
    ASSERT_TRUE(server.Start({"--repository", root.string()}));
    httplib::Client c("127.0.0.1", server.port());
    c.set_read_timeout(60, 0);
    EXPECT_EQ(InferOnes(c, "ext"), k64);
    EXPECT_EQ(InferOnes(c, "vext", "1"), k64);
    EXPECT_EQ(InferOnes(c, "vext", "2"), k128) << "each version its own weights";
    ASSERT_GT(CacheEntries(cache), 0u) << "the cache is on";
    const std::vector<std::pair<std::string, std::string>> refused = {
        {"missing", "does not exist"},
        {"dotdot", "leaves the model's folder"},
        {"absolute", "is absolute"},
        {"link", "resolves outside the model's folder"}};
    for (const auto& [model, says] : refused) {
      auto res = c.Post(("/v2/repository/models/" + model + "/load").c_str(), "", "application/json");
      ASSERT_TRUE(res);
      EXPECT_EQ(res->status, 503) << model << ": " << res->body;
      EXPECT_NE(res->body.find("external-data file"), std::string::npos) << res->body;
      EXPECT_NE(res->body.find(says), std::string::npos) << res->body;
    }
    EXPECT_EQ(InferOnes(c, "ext"), k64) << "the server keeps serving";
    // New weights renamed over the old ones; unload, load: the new weights.
    testing::ReplaceMatMulWeights(root / "ext" / "weights.bin", 2.f);
    ASSERT_EQ(c.Post("/v2/repository/models/ext/unload", "", "application/json")->status, 200);
    ASSERT_EQ(c.Post("/v2/repository/models/ext/load", "", "application/json")->status, 200);
    EXPECT_EQ(InferOnes(c, "ext"), k128);
    EXPECT_EQ(server.Stop(), 0);
  }
  // Changed while the server was down (rewritten in place): a restart serves them.
  testing::ReplaceMatMulWeights(root / "ext" / "weights.bin", 3.f, /*in_place=*/true);
  for (int restart = 0; restart < 2; ++restart) {
    const size_t entries = CacheEntries(cache);
    testing::ServerProcess server;
    ASSERT_TRUE(server.Start({"--repository", root.string()}));
    httplib::Client c("127.0.0.1", server.port());
    c.set_read_timeout(60, 0);
    EXPECT_EQ(InferOnes(c, "ext"), k192) << "restart " << restart;
    EXPECT_EQ(InferOnes(c, "vext", "2"), k128);
    EXPECT_EQ(CacheEntries(cache), entries + (restart == 0 ? 1 : 0))
        << (restart == 0 ? "the new weights' entry" : "every model from its entry");
    EXPECT_EQ(server.Stop(), 0);
  }
  if (saved) {
    setenv("EBB_CACHE_DIR", saved_dir.c_str(), 1);
  } else {
    unsetenv("EBB_CACHE_DIR");
  }
  fs::remove_all(root);
  fs::remove_all(cache);
  fs::remove(outside);
}

}  // namespace
}  // namespace ebb

// ---------------------------------------------------------------------------
// Admission by memory over the real server (issue 19): the convnet at
// 1024x1024 needs 128 MiB of arena and ~133 MiB with its output; a shared arena
// capped at 320 MiB fits two such runs, not four.

namespace ebb {
namespace {

// A policy file capping the shared CPU arena at `cap` bytes.
std::string CapPolicy(int64_t cap) {
  const std::string path = ::testing::TempDir() + "/ebb_cap_" + std::to_string(getpid()) + "_" + std::to_string(cap) + ".json";
  std::ofstream(path) << R"({"cpu": {"arena_settings": {"max_bytes": )" << cap << "}}}";
  return path;
}

httplib::Client LongClient(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  return c;
}

// A raw request on its own socket: sent whole, then the socket is kept (or closed by the caller).
int SendRaw(int port, const std::string& body) {
  const size_t json_len = body.find('\n') + 1;
  const std::string head = "POST /v2/models/convnet/infer HTTP/1.1\r\nHost: x\r\nContent-Type: "
                           "application/octet-stream\r\nInference-Header-Content-Length: " +
                           std::to_string(json_len) + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  (void)!write(fd, head.data(), head.size());
  for (size_t at = 0; at < body.size();) {
    const ssize_t n = write(fd, body.data() + at, body.size() - at);
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  return fd;
}

// Waits until `sample` of /metrics reads `value` (up to 20 s).
bool WaitForMetric(int port, const std::string& sample, double value) {
  httplib::Client c("127.0.0.1", port);
  for (int i = 0; i < 2000; ++i) {
    if (MetricOf(c, sample) == value) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Waits until the big run holds its reservation of the capped arena: not only its call started
// (a smaller request sent meanwhile could otherwise reach the pool first and run beside it).
bool WaitForBigReservation(int port) {
  httplib::Client c("127.0.0.1", port);
  for (int i = 0; i < 2000; ++i) {
    if (MetricOf(c, R"(ebb_memory_reserved_bytes{against="arena",device="cpu"})") >= (500 << 20)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

class ServerAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::kRssBoundsHold) GTEST_SKIP() << "needs are measured from RSS: " << testing::kNoRssBounds;
    repo_ = MakeRepository();
  }
  void TearDown() override {
    if (!repo_.empty()) RemoveRepository(repo_);
  }
  bool Start(int64_t cap, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"--repository", repo_, "--policy", CapPolicy(cap)};
    args.insert(args.end(), more.begin(), more.end());
    return server_.Start(args);
  }
  std::string repo_;
  testing::ServerProcess server_;
};

TEST_F(ServerAdmissionTest, FourConcurrentRequestsThatEachFitAloneAllSucceedUnderTheCap) {
  ASSERT_TRUE(Start(320 << 20));
  const std::string body = BigConvnetRequest(1024);
  std::vector<int> status(4);
  std::vector<std::string> errors(4);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      auto res = PostBig(server_.port(), body);
      status[i] = res ? res->status : -1;
      if (res && res->status != 200) errors[i] = res->body;
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(status[i], 200) << errors[i];
  httplib::Client c = LongClient(server_.port());
  EXPECT_EQ(MetricOf(c, R"(ebb_runs_admitted{device="cpu"})"), 4);
  EXPECT_GE(MetricOf(c, "ebb_memory_wait_seconds_count"), 2) << "the first ran alone, then at most two at once";
  EXPECT_EQ(MetricOf(c, R"(ebb_memory_reserved_bytes{against="budget",device="cpu"})"), 0);
  EXPECT_EQ(MetricOf(c, R"(ebb_memory_reserved_bytes{against="arena",device="cpu"})"), 0);
  EXPECT_EQ(MetricOf(c, R"(ebb_memory_run_limit_bytes{against="arena",device="cpu"})"), 320 << 20);
  EXPECT_GT(MetricOf(c, R"(ebb_memory_run_limit_bytes{against="budget",device="cpu"})"), 320 << 20);
  EXPECT_EQ(MetricOf(c, R"(ebb_runs_waiting_for_memory{device="cpu"})"), 0);
  EXPECT_GT(MetricOf(c, R"(ebb_model_predicted_need_bytes{model="convnet"})"), 128 << 20);
  EXPECT_GE(MetricOf(c, R"(ebb_model_predicted_arena_need_bytes{model="convnet"})"), 128 << 20);
  EXPECT_LT(MetricOf(c, R"(ebb_model_predicted_arena_need_bytes{model="convnet"})"), 140 << 20)
      << "the arena's own need: the other requests' bodies, decoded meanwhile, do not count in it";
  EXPECT_LE(MetricOf(c, R"(ebb_arena_peak_in_use_bytes{arena="cpu:shared"})"), 320 << 20);
  const json stats = json::parse(c.Get("/v2/models/convnet/stats")->body)["model_stats"][0]["ebb"];
  ASSERT_EQ(stats["need_points"].size(), 1u) << stats.dump();
  EXPECT_EQ(stats["need_points"][0]["input_elements"], 3 * 1024 * 1024);
  // The latest request's reservation: the prediction then (a last request alone may be measured after it).
  EXPECT_LE(stats["predicted_need_bytes"].get<int64_t>(), stats["need_points"][0]["bytes"].get<int64_t>());
  EXPECT_GE(stats["predicted_need_bytes"].get<int64_t>(), 128 << 20);
  ASSERT_EQ(stats["arena_need_points"].size(), 1u) << stats.dump();
  EXPECT_LE(stats["predicted_arena_need_bytes"].get<int64_t>(), stats["arena_need_points"][0]["bytes"].get<int64_t>());
  EXPECT_EQ(stats["reserved_bytes"], 0);
  EXPECT_EQ(stats["out_of_memory"], 0);
  EXPECT_EQ(server_.Stop(), 0);
}

TEST_F(ServerAdmissionTest, ARequestPredictedLargerThanTheCapFailsAtOnceWithTheNumbers) {
  ASSERT_TRUE(Start(320 << 20));
  // Two sizes measured alone: the line through them bounds a larger request's need.
  ASSERT_EQ(PostBig(server_.port(), BigConvnetRequest(256))->status, 200);
  ASSERT_EQ(PostBig(server_.port(), BigConvnetRequest(512))->status, 200);
  const std::string body = BigConvnetRequest(3072);  // made before the clock starts
  const auto start = std::chrono::steady_clock::now();
  auto res = PostBig(server_.port(), body);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_NE(res->body.find("a run of 28311552 input elements needs at least"), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("the shared CPU arena's cap of 320.0 MiB (335544320 bytes)"), std::string::npos)
      << res->body;
  EXPECT_NE(res->body.find("cannot run even alone"), std::string::npos) << res->body;
  EXPECT_LT(took, std::chrono::seconds(3)) << "at once (the 113 MB body's transfer and decoding aside)";
  httplib::Client c = LongClient(server_.port());
  EXPECT_EQ(MetricOf(c, R"(ebb_runs_refused_memory{device="cpu"})"), 1);
  EXPECT_EQ(MetricOf(c, R"(ebb_inference_failures_total{code="resource_exhausted",model="convnet"})"), 1);
  EXPECT_EQ(PostBig(server_.port(), BigConvnetRequest(512))->status, 200) << "and smaller requests still run";
  EXPECT_EQ(server_.Stop(), 0);
}

// A 2560x2560 run (800 MiB of arena predicted: 6.25 times a 1024x1024 run's 128 MiB) fills a
// 900 MiB cap for 1.5 s or more (4 s and more on a busy machine): a 1024x1024 request cannot fit
// beside it and waits.
constexpr int kBigSide = 2560;
constexpr int64_t kBigCap = int64_t{900} << 20;

TEST_F(ServerAdmissionTest, WaitingRequestsHonourTheQueueLimitAndTheDeadline) {
  ASSERT_TRUE(Start(kBigCap, {"--workers", "2", "--queue", "0", "--queue-timeout-ms", "400"}));
  ASSERT_EQ(PostBig(server_.port(), BigConvnetRequest(1024))->status, 200);  // measured alone
  std::thread big([&] { EXPECT_EQ(PostBig(server_.port(), BigConvnetRequest(kBigSide))->status, 200); });
  ASSERT_TRUE(WaitForBigReservation(server_.port()));
  const auto start = std::chrono::steady_clock::now();
  std::atomic<bool> waited_out{false};
  std::thread waiting([&] {
    auto res = PostBig(server_.port(), BigConvnetRequest(1024));
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 503) << res->body;
    EXPECT_NE(res->body.find("waited"), std::string::npos) << res->body;
    EXPECT_NE(res->body.find("ms for memory"), std::string::npos) << res->body;
    EXPECT_NE(res->body.find("retry later"), std::string::npos) << res->body;
    waited_out = true;
  });
  ASSERT_TRUE(WaitForMetric(server_.port(), R"(ebb_runs_waiting_for_memory{device="cpu"})", 1));
  // Both workers are taken (one runs, one waits for memory) and no queue: the next is refused at once.
  auto busy = PostBig(server_.port(), BigConvnetRequest(16));
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 503);
  EXPECT_NE(busy->body.find("server busy"), std::string::npos) << busy->body;
  waiting.join();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(waited_out);
  EXPECT_GE(took, std::chrono::milliseconds(350));
  EXPECT_LT(took, std::chrono::seconds(10)) << "never a hang";
  big.join();
  EXPECT_EQ(PostBig(server_.port(), BigConvnetRequest(1024))->status, 200) << "the memory came back";
  httplib::Client c = LongClient(server_.port());
  EXPECT_EQ(MetricOf(c, R"(ebb_runs_waiting_for_memory{device="cpu"})"), 0);
  EXPECT_EQ(server_.Stop(), 0);
}

TEST_F(ServerAdmissionTest, AClientThatDisconnectsWhileWaitingFreesItsPlace) {
  ASSERT_TRUE(Start(kBigCap, {"--workers", "2"}));
  ASSERT_EQ(PostBig(server_.port(), BigConvnetRequest(1024))->status, 200);  // measured alone
  std::thread big([&] { EXPECT_EQ(PostBig(server_.port(), BigConvnetRequest(kBigSide))->status, 200); });
  ASSERT_TRUE(WaitForBigReservation(server_.port()));
  const std::string body = BigConvnetRequest(1024);
  // One waits for memory (the second worker), one for a worker; both clients go away.
  const int for_memory = SendRaw(server_.port(), body);
  ASSERT_GE(for_memory, 0);
  ASSERT_TRUE(WaitForMetric(server_.port(), R"(ebb_runs_waiting_for_memory{device="cpu"})", 1));
  const int for_worker = SendRaw(server_.port(), body);
  ASSERT_GE(for_worker, 0);
  ASSERT_TRUE(WaitForMetric(server_.port(), "ebb_inference_queued", 1));
  close(for_worker);
  EXPECT_TRUE(WaitForMetric(server_.port(), "ebb_inference_queued", 0)) << "its place in the worker queue is free";
  close(for_memory);
  EXPECT_TRUE(WaitForMetric(server_.port(), R"(ebb_runs_waiting_for_memory{device="cpu"})", 0))
      << "its place in the memory line is free";
  // Counted once each call's thread has left the line (the gauges above fall first).
  EXPECT_TRUE(WaitForMetric(server_.port(), R"(ebb_inference_failures_total{code="cancelled",model="convnet"})", 2));
  // A call counts its failure before it gives its worker back: waited for, not read at once (it read
  // 2 once, under load).
  EXPECT_TRUE(WaitForMetric(server_.port(), "ebb_inference_running", 1)) << "the big one still runs, alone";
  big.join();
  EXPECT_EQ(PostBig(server_.port(), BigConvnetRequest(1024))->status, 200);
  EXPECT_EQ(server_.Stop(), 0);
}

// Requests that run on an event-loop thread (at most --io-threads - 1 at once, server/http/http_server.h):
// one may wait there for memory, yet the last free event-loop thread answers health probes, and a
// client that goes away frees its place as on a worker (its socket is asked, not watched). With two
// HTTP workers, the third request and the metrics can only be served if the first two took no worker.
TEST_F(ServerAdmissionTest, RequestsOnTheEventLoopLeaveTheirPlaceAndLeaveHealthAnswered) {
  ASSERT_TRUE(Start(kBigCap, {"--workers", "2", "--io-threads", "3", "--http-threads", "2"}));
  ASSERT_EQ(PostBig(server_.port(), BigConvnetRequest(1024))->status, 200);  // measured alone
  std::thread big([&] { EXPECT_EQ(PostBig(server_.port(), BigConvnetRequest(kBigSide))->status, 200); });
  ASSERT_TRUE(WaitForBigReservation(server_.port()));
  const std::string body = BigConvnetRequest(1024);
  const int for_memory = SendRaw(server_.port(), body);  // the second event-loop turn: waits there
  ASSERT_GE(for_memory, 0);
  ASSERT_TRUE(WaitForMetric(server_.port(), R"(ebb_runs_waiting_for_memory{device="cpu"})", 1));
  const int for_worker = SendRaw(server_.port(), body);  // no turn left: a worker, waiting for an inference slot
  ASSERT_GE(for_worker, 0);
  ASSERT_TRUE(WaitForMetric(server_.port(), "ebb_inference_queued", 1));
  {
    httplib::Client c("127.0.0.1", server_.port());
    c.set_read_timeout(5, 0);
    const auto t0 = std::chrono::steady_clock::now();
    auto live = c.Get("/v2/health/live");
    ASSERT_TRUE(live);
    EXPECT_EQ(live->status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1)) << "the third event-loop thread answers";
  }
  close(for_worker);
  EXPECT_TRUE(WaitForMetric(server_.port(), "ebb_inference_queued", 0)) << "its place in the worker queue is free";
  close(for_memory);
  EXPECT_TRUE(WaitForMetric(server_.port(), R"(ebb_runs_waiting_for_memory{device="cpu"})", 0))
      << "its place in the memory line is free";
  EXPECT_TRUE(WaitForMetric(server_.port(), R"(ebb_inference_failures_total{code="cancelled",model="convnet"})", 2));
  httplib::Client c = LongClient(server_.port());
  // A call counts its failure before it gives its worker back: waited for, not read at once (it read
  // 2 once, under load).
  EXPECT_TRUE(WaitForMetric(server_.port(), "ebb_inference_running", 1)) << "the big one still runs, alone";
  big.join();
  EXPECT_EQ(PostBig(server_.port(), BigConvnetRequest(1024))->status, 200);
  EXPECT_EQ(server_.Stop(), 0);
}

}  // namespace
}  // namespace ebb
