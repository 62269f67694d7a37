// Black-box tests of the protocol extensions of `ebb serve` over real HTTP:
// versions, repository index, load with a configuration, model configuration,
// statistics (against /metrics), classification, lifecycle loads, start-up
// warnings. The requests are the ones the Triton Python client (tritonclient.
// http) sends: its get_model_repository_index POSTs v2/repository/index with an
// empty body, load_model POSTs {"parameters": {"config": "<json>"}} (or {}),
// unload_model {"parameters": {"unload_dependents": false}},
// get_model_config / get_inference_statistics GET .../config and
// v2/models[/{m}[/versions/{v}]]/stats, and InferRequestedOutput(name,
// class_count=K) asks {"name": ..., "parameters": {"classification": K,
// "binary_data": true}} (tritonclient/http/_client.py, _requested_output.py).
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <thread>

#include "server_process.h"
#include "test_util.h"

namespace ebb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kModels = EBB_MODELS_DIR;

void CopyModel(const std::string& model, const fs::path& to) {
  fs::create_directories(to.parent_path());
  fs::copy_file(kModels + "/" + model + "/model.onnx", to, fs::copy_options::overwrite_existing);
}

// tiny, mixed and strings flat; vtiny with versions 1 and 3 (distinct bytes); labelled:
// mixed with a labels file.
std::string MakeRepository(const std::string& tag) {
  const fs::path root = fs::path(::testing::TempDir()) / ("ebb_ext_" + tag + "_" + std::to_string(getpid()));
  fs::remove_all(root);
  CopyModel("tiny", root / "tiny" / "model.onnx");
  CopyModel("mixed", root / "mixed" / "model.onnx");
  CopyModel("mixed", root / "labelled" / "model.onnx");
  std::ofstream(root / "labelled" / "labels.txt") << "zero\none\ntwo\nthree\n";
  CopyModel("strings", root / "strings" / "model.onnx");
  CopyModel("tiny", root / "vtiny" / "1" / "model.onnx");
  fs::create_directories(root / "vtiny" / "3");
  testing::WriteModelVariant(kModels + "/tiny/model.onnx", (root / "vtiny" / "3" / "model.onnx").string(), "v3");
  return root.string();
}

json TinyRequest(float value = 0.5f) {
  return {{"inputs", {{{"name", "x"}, {"shape", {1, 64}}, {"datatype", "FP32"},
                       {"data", std::vector<float>(64, value)}}}}};
}

json MixedRequest() {
  return {{"inputs",
           {{{"name", "a"}, {"shape", {2, 4}}, {"datatype", "FP32"}, {"data", {1.5, 9, 3, 4, 5, 6, 7, 8}}},
            {{"name", "b"}, {"shape", {2, 4}}, {"datatype", "INT64"}, {"data", {1, 2, 3, 4, 50, 6, 7, 8}}},
            {{"name", "c"}, {"shape", {2, 4}}, {"datatype", "UINT8"}, {"data", {0, 1, 2, 3, 0, 1, 2, 3}}},
            {{"name", "flag"}, {"shape", {2, 4}}, {"datatype", "BOOL"},
             {"data", {true, false, true, false, false, false, true, true}}}}}};
}

class ProtocolExtTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repository_ = MakeRepository("main");
    server_ = new testing::ServerProcess();
    ASSERT_TRUE(server_->Start({"--repository", repository_, "--no-load"}));
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Stop(SIGTERM), 0);
    delete server_;
    fs::remove_all(repository_);
  }

  static httplib::Client Client() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(60, 0);
    return c;
  }
  static httplib::Result Get(const std::string& path) { return Client().Get(path.c_str()); }
  static httplib::Result Post(const std::string& path, const std::string& body) {
    return Client().Post(path.c_str(), body, "application/json");
  }
  static json Body(const httplib::Result& res) { return json::parse(res->body, nullptr, false); }
  // The value of one sample of /metrics, or 0.
  static double Metric(const std::string& sample) {
    auto res = Get("/metrics");
    std::istringstream lines(res ? res->body : "");
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
    }
    return 0;
  }
  static bool Ready(const std::string& model) { return Get("/v2/models/" + model + "/ready")->status == 200; }

  static inline std::string repository_;
  static inline testing::ServerProcess* server_ = nullptr;
};

TEST_F(ProtocolExtTest, TrailingSlashAndServerMetadataExtensions) {
  auto plain = Get("/v2");
  auto slash = Get("/v2/");
  ASSERT_TRUE(plain && slash);
  EXPECT_EQ(slash->status, 200);
  EXPECT_EQ(slash->body, plain->body);
  const json extensions = Body(slash)["extensions"];
  for (const char* e : {"binary_tensor_data", "classification", "model_configuration", "model_repository", "statistics"}) {
    EXPECT_NE(std::find(extensions.begin(), extensions.end(), e), extensions.end()) << e;
  }
  EXPECT_EQ(Get("/v2/models/tiny/")->status, 200);
}

TEST_F(ProtocolExtTest, RepositoryIndexTakesAnEmptyBodyOrReadyTrue) {
  ASSERT_EQ(Post("/v2/repository/models/tiny/load", "")->status, 200);
  ASSERT_EQ(Post("/v2/repository/models/mixed/unload", R"({"parameters":{"unload_dependents":false}})")->status, 200);
  auto all = Post("/v2/repository/index", "");  // what tritonclient sends
  ASSERT_EQ(all->status, 200) << all->body;
  std::set<std::string> names, ready;
  for (const json& m : Body(all)) names.insert(m["name"]);
  EXPECT_EQ(names, (std::set<std::string>{"labelled", "mixed", "strings", "tiny", "vtiny"}));
  auto only_ready = Post("/v2/repository/index", R"({"ready": true})");
  ASSERT_EQ(only_ready->status, 200) << only_ready->body;
  for (const json& m : Body(only_ready)) {
    EXPECT_EQ(m["state"], "READY") << m.dump();
    ready.insert(m["name"]);
  }
  EXPECT_TRUE(ready.contains("tiny"));
  EXPECT_FALSE(ready.contains("mixed"));
  EXPECT_EQ(Body(Post("/v2/repository/index", R"({"ready": false})")).size(), Body(all).size());
  EXPECT_EQ(Post("/v2/repository/index", R"({"ready": "yes"})")->status, 400);
  EXPECT_EQ(Post("/v2/repository/index", "[1,2]")->status, 400);
  EXPECT_EQ(Post("/v2/repository/index", "")->status, 200) << "and it keeps serving";
}

TEST_F(ProtocolExtTest, VersionFoldersServeTheHighestByDefault) {
  auto meta = Get("/v2/models/vtiny");
  ASSERT_EQ(meta->status, 200) << meta->body;
  EXPECT_EQ(Body(meta)["versions"], json({"3"}));
  auto res = Post("/v2/models/vtiny/infer", TinyRequest().dump());
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(Body(res)["model_version"], "3");
  auto v3 = Post("/v2/models/vtiny/versions/3/infer", TinyRequest().dump());
  ASSERT_EQ(v3->status, 200) << v3->body;
  EXPECT_EQ(Body(v3)["outputs"], Body(res)["outputs"]);
  auto v1 = Post("/v2/models/vtiny/versions/1/infer", TinyRequest().dump());
  EXPECT_EQ(v1->status, 404);
  EXPECT_NE(v1->body.find("versions served: 3"), std::string::npos) << v1->body;
  EXPECT_EQ(Get("/v2/models/vtiny/versions/1")->status, 404);
  EXPECT_EQ(Get("/v2/models/vtiny/versions/7/ready")->status, 404);
  // A flat folder is version 1.
  EXPECT_EQ(Post("/v2/models/tiny/versions/1/infer", TinyRequest().dump())->status, 200);
  auto flat2 = Post("/v2/models/tiny/versions/2/infer", TinyRequest().dump());
  EXPECT_EQ(flat2->status, 404);
  EXPECT_NE(flat2->body.find("versions served: 1"), std::string::npos) << flat2->body;
  // The index lists the version served.
  for (const json& m : Body(Post("/v2/repository/index", ""))) {
    if (m["name"] == "vtiny") {
      EXPECT_EQ(m["version"], "3");
    }
  }
}

TEST_F(ProtocolExtTest, LoadWithAConfigurationIsHonouredFieldByField) {
  // Serve both versions of vtiny, then only 1, through the load request's config.
  auto both = Post("/v2/repository/models/vtiny/load",
                   json{{"parameters", {{"config", R"({"versions": [1, 3], "keep_alive_ms": -1})"}}}}.dump());
  ASSERT_EQ(both->status, 200) << both->body;
  EXPECT_EQ(Body(Get("/v2/models/vtiny"))["versions"], json({"1", "3"}));
  EXPECT_TRUE(Ready("vtiny/versions/1") && Ready("vtiny/versions/3"));
  auto v1 = Post("/v2/models/vtiny/versions/1/infer", TinyRequest().dump());
  ASSERT_EQ(v1->status, 200) << v1->body;
  EXPECT_EQ(Body(v1)["model_version"], "1");
  auto config = Body(Get("/v2/models/vtiny/config"));
  EXPECT_EQ(config["version_policy"], json({{"specific", {{"versions", {1, 3}}}}}));
  EXPECT_EQ(config["ebb"]["config_source"], "load request");
  EXPECT_EQ(config["ebb"]["keep_alive_ms"], -1);
  // Triton's version_policy works too.
  auto only1 = Post("/v2/repository/models/vtiny/load",
                    json{{"parameters", {{"config", R"({"version_policy": {"specific": {"versions": ["1"]}}})"}}}}.dump());
  ASSERT_EQ(only1->status, 200) << only1->body;
  EXPECT_EQ(Body(Get("/v2/models/vtiny"))["versions"], json({"1"}));
  EXPECT_EQ(Get("/v2/models/vtiny/versions/3/ready")->status, 404);
  // The configuration GET returns loads back unchanged (a round trip).
  auto round_trip = Post("/v2/repository/models/vtiny/load",
                         json{{"parameters", {{"config", Get("/v2/models/vtiny/config")->body}}}}.dump());
  EXPECT_EQ(round_trip->status, 200) << round_trip->body;
  // The model's own graph optimization level, at the top or under "ebb", reported back.
  auto level = Post("/v2/repository/models/vtiny/load",
                    json{{"parameters", {{"config", R"({"ebb": {"graph_optimization": "all"}})"}}}}.dump());
  ASSERT_EQ(level->status, 200) << level->body;
  EXPECT_EQ(Body(Get("/v2/models/vtiny/config"))["ebb"]["graph_optimization"], "all");
  ASSERT_EQ(Post("/v2/models/vtiny/infer", TinyRequest().dump())->status, 200);
  // A load without a config reads config.json again (vtiny has none: the defaults, the highest version),
  // and says so (issue 25: it claimed "config.json" for a folder without one).
  ASSERT_EQ(Post("/v2/repository/models/vtiny/load", "{}")->status, 200);
  EXPECT_EQ(Body(Get("/v2/models/vtiny"))["versions"], json({"3"}));
  EXPECT_EQ(Body(Get("/v2/models/vtiny/config"))["ebb"]["config_source"], "defaults");
  EXPECT_EQ(Body(Get("/v2/models/tiny/config"))["ebb"]["config_source"], "defaults");

  struct Bad {
    std::string body;
    const char* mentions;
  } bad[] = {
      {json{{"parameters", {{"config", R"({"max_batch_size": 8})"}}}}.dump(), "max_batch_size"},
      {json{{"parameters", {{"config", R"({"dynamic_batching": {}})"}}}}.dump(), "dynamic_batching"},
      {json{{"parameters", {{"config", R"({"ebb": {"tile_size": 4}})"}}}}.dump(), "config.ebb.tile_size"},
      {json{{"parameters", {{"config", R"({"kind": "video"})"}}}}.dump(), "config.kind"},
      {json{{"parameters", {{"config", R"({"graph_optimization": "fastest"})"}}}}.dump(), "config.graph_optimization"},
      {json{{"parameters", {{"config", R"({"name": "other"})"}}}}.dump(), "config.name"},
      {json{{"parameters", {{"config", R"({"input": [{"name": "x", "data_type": "TYPE_FP16"}]})"}}}}.dump(),
       "data_type"},
      {json{{"parameters", {{"config", R"({"versions": [2]})"}}}}.dump(), "version 2"},
      {json{{"parameters", {{"config", "not json"}}}}.dump(), "not a JSON object"},
      {json{{"parameters", {{"config", 7}}}}.dump(), "must be a string"},
      {json{{"parameters", {{"file:1/model.onnx", "AAAA"}}}}.dump(), "file:1/model.onnx"},
  };
  for (const Bad& b : bad) {
    auto res = Post("/v2/repository/models/vtiny/load", b.body);
    EXPECT_EQ(res->status, 400) << b.body << ": " << res->body;
    EXPECT_NE(res->body.find(b.mentions), std::string::npos) << b.body << ": " << res->body;
    EXPECT_EQ(Post("/v2/models/vtiny/infer", TinyRequest().dump())->status, 200) << "after " << b.body;
  }
  EXPECT_EQ(Post("/v2/repository/models/tiny/unload", R"({"parameters":{"cascade":true}})")->status, 400);
}

TEST_F(ProtocolExtTest, ModelConfigurationInTritonsShape) {
  auto res = Get("/v2/models/mixed/config");
  ASSERT_EQ(res->status, 200) << res->body;
  const json c = Body(res);
  EXPECT_EQ(c["name"], "mixed");
  EXPECT_EQ(c["platform"], "onnxruntime_onnx");
  EXPECT_EQ(c["backend"], "onnxruntime");
  EXPECT_EQ(c["max_batch_size"], 0);
  EXPECT_EQ(c["version_policy"], json({{"latest", {{"num_versions", 1}}}}));
  ASSERT_EQ(c["input"].size(), 4u);
  EXPECT_EQ(c["input"][0], json({{"name", "a"}, {"data_type", "TYPE_FP32"}, {"format", "FORMAT_NONE"}, {"dims", {-1, 4}}}));
  EXPECT_EQ(c["input"][3]["data_type"], "TYPE_BOOL");
  EXPECT_EQ(c["output"][3], json({{"name", "d"}, {"data_type", "TYPE_FP64"}, {"dims", {-1, 4}}, {"label_filename", ""}}));
  EXPECT_EQ(c["ebb"]["kind"], "tensor");
  EXPECT_EQ(c["ebb"]["pinned"], false);
  EXPECT_EQ(c["ebb"]["device"], "cpu") << "the device in force: ebb serve --device";
  EXPECT_TRUE(c["ebb"].contains("charge_bytes"));
  EXPECT_EQ(Body(Get("/v2/models/labelled/config"))["output"][0]["label_filename"], "labels.txt");
  EXPECT_EQ(Get("/v2/models/mixed/versions/1/config")->body, res->body);
  EXPECT_EQ(Get("/v2/models/mixed/versions/2/config")->status, 404);
  EXPECT_EQ(Get("/v2/models/nope/config")->status, 404);
  EXPECT_EQ(Post("/v2/models/mixed/config", "")->status, 405);
}

TEST_F(ProtocolExtTest, StatisticsCountWhatMetricsCount) {
  const std::string model = "labelled";  // no other test infers on it
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Post("/v2/models/" + model + "/infer", MixedRequest().dump())->status, 200);
  json wrong = MixedRequest();
  wrong["inputs"][0]["shape"] = {1, 4};
  for (int i = 0; i < 2; ++i) EXPECT_EQ(Post("/v2/models/" + model + "/infer", wrong.dump())->status, 400);
  auto res = Get("/v2/models/" + model + "/stats");
  ASSERT_EQ(res->status, 200) << res->body;
  const json stats = Body(res)["model_stats"];
  ASSERT_EQ(stats.size(), 1u);
  const json& s = stats[0];
  EXPECT_EQ(s["name"], model);
  EXPECT_EQ(s["version"], "1");
  EXPECT_EQ(s["inference_count"], 3);
  EXPECT_EQ(s["execution_count"], 3);
  EXPECT_GT(s["last_inference"].get<uint64_t>(), 1600000000000u);
  const json& i = s["inference_stats"];
  EXPECT_EQ(i["success"]["count"], 3);
  EXPECT_EQ(i["fail"]["count"], 2);
  EXPECT_EQ(i["compute_infer"]["count"], 3);
  EXPECT_EQ(i["compute_input"]["count"], 3);
  EXPECT_EQ(i["compute_output"]["count"], 3);
  EXPECT_GE(i["queue"]["count"], 3);
  EXPECT_GT(i["success"]["ns"].get<uint64_t>(), i["compute_infer"]["ns"].get<uint64_t>());
  EXPECT_EQ(s["ebb"]["state"], "READY");
  EXPECT_GT(s["ebb"]["charge_bytes"].get<int64_t>(), 0);
  // The same counts as /metrics.
  const std::string label = "{model=\"" + model + "\"}";
  EXPECT_EQ(Metric("ebb_inference_requests_total" + label), 5);
  EXPECT_EQ(Metric("ebb_inference_duration_seconds_count" + label), 3);
  EXPECT_EQ(Metric("ebb_inference_failures_total{code=\"invalid_argument\",model=\"" + model + "\"}"), 2);
  EXPECT_EQ(Metric("ebb_releases_total" + label), s["ebb"]["releases"].get<double>());
  // Every model, and one version.
  auto all = Body(Get("/v2/models/stats"))["model_stats"];
  std::set<std::string> names;
  for (const json& m : all) names.insert(m["name"]);
  EXPECT_EQ(names, (std::set<std::string>{"labelled", "mixed", "strings", "tiny", "vtiny"}));
  EXPECT_EQ(Body(Get("/v2/models/" + model + "/versions/1/stats"))["model_stats"], stats);
  EXPECT_EQ(Get("/v2/models/" + model + "/versions/4/stats")->status, 404);
  EXPECT_EQ(Get("/v2/models/nope/stats")->status, 404);
}

// The top-K entries of one row of `values`, as Triton writes them.
std::vector<std::string> TopK(const std::vector<float>& values, size_t k, const std::vector<std::string>& labels = {}) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] > values[b]; });
  std::vector<std::string> out;
  for (size_t i = 0; i < k; ++i) {
    out.push_back(std::to_string(values[order[i]]) + ":" + std::to_string(order[i]) +
                  (labels.empty() ? "" : ":" + labels[order[i]]));
  }
  return out;
}

TEST_F(ProtocolExtTest, ClassificationInJsonAndBinary) {
  // sum = a + b + c: row 0 = [2.5, 12, 8, 11], row 1 = [55, 13, 16, 19].
  const std::vector<float> row0 = {2.5f, 12, 8, 11}, row1 = {55, 13, 16, 19};
  json request = MixedRequest();
  request["outputs"] = {{{"name", "sum"}, {"parameters", {{"classification", 2}, {"binary_data", false}}}},
                        {{"name", "b2"}}};
  auto res = Post("/v2/models/mixed/infer", request.dump());
  ASSERT_EQ(res->status, 200) << res->body;
  json out = Body(res)["outputs"];
  EXPECT_EQ(out[0]["datatype"], "BYTES");
  EXPECT_EQ(out[0]["shape"], json({2, 2}));
  std::vector<std::string> expected = TopK(row0, 2);
  for (const std::string& s : TopK(row1, 2)) expected.push_back(s);
  EXPECT_EQ(out[0]["data"], json(expected));
  EXPECT_EQ(out[1]["datatype"], "INT64") << "outputs without the parameter come back as they are";

  // Binary, as tritonclient asks (binary_data true), with labels: 4-byte lengths before each element.
  request["outputs"] = {{{"name", "sum"}, {"parameters", {{"classification", 3}, {"binary_data", true}}}}};
  auto bin = Post("/v2/models/labelled/infer", request.dump());
  ASSERT_EQ(bin->status, 200) << bin->body;
  const size_t header = std::stoul(bin->get_header_value("Inference-Header-Content-Length"));
  const json meta = json::parse(bin->body.substr(0, header));
  EXPECT_EQ(meta["outputs"][0]["shape"], json({2, 3}));
  std::string expected_bytes;
  const std::vector<std::string> labels = {"zero", "one", "two", "three"};
  for (const auto& row : {row0, row1}) {
    for (const std::string& s : TopK(row, 3, labels)) {
      const uint32_t n = static_cast<uint32_t>(s.size());
      expected_bytes += std::string(reinterpret_cast<const char*>(&n), 4) + s;
    }
  }
  EXPECT_EQ(meta["outputs"][0]["parameters"]["binary_data_size"], expected_bytes.size());
  EXPECT_EQ(bin->body.substr(header), expected_bytes);

  // K larger than the classes gives them all; a BOOL output cannot be classified; K < 0 is refused.
  request["outputs"] = {{{"name", "sum"}, {"parameters", {{"classification", 10}, {"binary_data", false}}}}};
  EXPECT_EQ(Body(Post("/v2/models/mixed/infer", request.dump()))["outputs"][0]["shape"], json({2, 4}));
  request["outputs"] = {{{"name", "nflag"}, {"parameters", {{"classification", 1}}}}};
  auto boolean = Post("/v2/models/mixed/infer", request.dump());
  EXPECT_EQ(boolean->status, 400);
  EXPECT_NE(boolean->body.find("numeric"), std::string::npos) << boolean->body;
  request["outputs"] = {{{"name", "sum"}, {"parameters", {{"classification", -1}}}}};
  EXPECT_EQ(Post("/v2/models/mixed/infer", request.dump())->status, 400);
  EXPECT_EQ(Post("/v2/models/mixed/infer", MixedRequest().dump())->status, 200);
}

// --- Separate servers -------------------------------------------------------------

// BYTES over REST, as JSON strings and as tritonclient's binary form (a 4-byte little-endian length
// before each element), through a model that takes and returns ONNX strings.
TEST_F(ProtocolExtTest, BytesInputsInJsonAndBinary) {
  const std::vector<std::string> text = {"apple", "banana", "kiwi", "cherry", "", "caf\xc3\xa9"};
  json request = {{"inputs", {{{"name", "text"}, {"shape", {2, 3}}, {"datatype", "BYTES"}, {"data", text}}}}};
  auto res = Post("/v2/models/strings/infer", request.dump());
  ASSERT_EQ(res->status, 200) << res->body;
  json out = Body(res)["outputs"];
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["name"], "echo");
  EXPECT_EQ(out[0]["datatype"], "BYTES");
  EXPECT_EQ(out[0]["shape"], json({2, 3}));
  EXPECT_EQ(out[0]["data"], json(text));
  EXPECT_EQ(out[1]["data"], json({0, 1, -1, 2, -1, -1}));

  std::string elements;
  for (const std::string& t : text) {
    const uint32_t n = static_cast<uint32_t>(t.size());
    elements.append(reinterpret_cast<const char*>(&n), 4);
    elements += t;
  }
  const std::string header = json{{"inputs", {{{"name", "text"}, {"shape", {2, 3}}, {"datatype", "BYTES"},
                                               {"parameters", {{"binary_data_size", elements.size()}}}}}},
                                  {"outputs", {{{"name", "echo"}, {"parameters", {{"binary_data", true}}}}}}}
                                 .dump();
  httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(header.size())}};
  auto bin = Client().Post("/v2/models/strings/infer", headers, header + elements, "application/octet-stream");
  ASSERT_EQ(bin->status, 200) << bin->body;
  const size_t json_length = std::stoul(bin->get_header_value("Inference-Header-Content-Length"));
  EXPECT_EQ(bin->body.substr(json_length), elements) << "the echo comes back in the same binary form";

  // A length running past the end is a 400 naming the input; the server keeps serving.
  const std::string bad_header = json{{"inputs", {{{"name", "text"}, {"shape", {1, 1}}, {"datatype", "BYTES"},
                                                   {"parameters", {{"binary_data_size", 7}}}}}}}
                                     .dump();
  const std::string bad = std::string("\x09\0\0\0abc", 7);
  auto refused = Client().Post("/v2/models/strings/infer",
                               {{"Inference-Header-Content-Length", std::to_string(bad_header.size())}},
                               bad_header + bad, "application/octet-stream");
  ASSERT_EQ(refused->status, 400);
  EXPECT_NE(refused->body.find("input \\\"text\\\": BYTES element 0 claims 9 bytes"), std::string::npos)
      << refused->body;
  EXPECT_EQ(Post("/v2/models/strings/infer", request.dump())->status, 200);
}

TEST(ProtocolLifecycleTest, LookingNeverLoadsAndAnExplicitLoadOutlivesKeepAliveZero) {
  const std::string repo = MakeRepository("life");
  testing::ServerProcess server;
  ASSERT_TRUE(server.Start({"--repository", repo, "--no-load", "--keep-alive-ms", "0"}));
  httplib::Client c("127.0.0.1", server.port());
  auto loads = [&] {
    auto m = c.Get("/metrics");
    return m->body.find("ebb_model_loads_total{model=\"tiny\"}") == std::string::npos ? 0 : 1;
  };
  // Metadata, config, ready, statistics and the index of a model never loaded.
  auto meta = c.Get("/v2/models/tiny");
  ASSERT_EQ(meta->status, 200) << meta->body;
  EXPECT_EQ(json::parse(meta->body)["inputs"][0]["shape"], json({1, 64})) << "read from model.onnx";
  EXPECT_EQ(c.Get("/v2/models/tiny/config")->status, 200);
  EXPECT_EQ(c.Get("/v2/models/tiny/stats")->status, 200);
  EXPECT_EQ(c.Get("/v2/models/tiny/ready")->status, 400);
  EXPECT_EQ(c.Post("/v2/repository/index", "", "application/json")->status, 200);
  EXPECT_EQ(loads(), 0) << "looking at a model does not load it";
  // An explicit load stays, although the default keep-alive is 0.
  ASSERT_EQ(c.Post("/v2/repository/models/tiny/load", "", "application/json")->status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(c.Get("/v2/models/tiny/ready")->status, 200);
  // A request applies keep-alive 0 again.
  ASSERT_EQ(c.Post("/v2/models/tiny/infer", TinyRequest().dump(), "application/json")->status, 200);
  EXPECT_EQ(c.Get("/v2/models/tiny/ready")->status, 400);
  EXPECT_EQ(server.Stop(), 0);
  fs::remove_all(repo);
}

TEST(ProtocolStartupTest, EveryFolderThatCannotBeServedIsWarnedAbout) {
  const fs::path root = fs::path(::testing::TempDir()) / ("ebb_ext_warn_" + std::to_string(getpid()));
  fs::remove_all(root);
  CopyModel("tiny", root / "good" / "model.onnx");
  fs::create_directories(root / "notes");
  CopyModel("tiny", root / "bad name" / "model.onnx");
  CopyModel("tiny", root / "broken_config" / "model.onnx");
  std::ofstream(root / "broken_config" / "config.json") << R"({"kind": "video"})";
  CopyModel("tiny", root / "both" / "model.onnx");
  CopyModel("tiny", root / "both" / "2" / "model.onnx");
  CopyModel("tiny", root / "gaps" / "2" / "model.onnx");
  fs::create_directories(root / "gaps" / "5");
  CopyModel("tiny", root / "missing_version" / "1" / "model.onnx");
  std::ofstream(root / "missing_version" / "config.json") << R"({"versions": [1, 4]})";
  const std::string err = (root.string() + "_stderr.txt");
  testing::ServerProcess server;
  ASSERT_TRUE(server.Start({"--repository", root.string(), "--no-load"}, err));
  httplib::Client c("127.0.0.1", server.port());
  EXPECT_EQ(c.Post("/v2/models/good/infer", TinyRequest().dump(), "application/json")->status, 200);
  EXPECT_EQ(c.Post("/v2/models/gaps/infer", TinyRequest().dump(), "application/json")->status, 200);
  EXPECT_EQ(server.Stop(), 0);
  std::ifstream in(err);
  const std::string said((std::istreambuf_iterator<char>(in)), {});
  for (const char* folder : {"'notes'", "'bad name'", "'broken_config'", "'both'", "'gaps/5'", "'missing_version'"}) {
    EXPECT_NE(said.find(std::string("folder ") + folder), std::string::npos) << folder << " in:\n" << said;
  }
  EXPECT_EQ(said.find("'good'"), std::string::npos) << said;
  EXPECT_NE(said.find("config.kind"), std::string::npos) << said;
  EXPECT_NE(said.find("both model.onnx and version folders"), std::string::npos) << said;
  EXPECT_NE(said.find("version 4"), std::string::npos) << said;
  fs::remove_all(root);
  fs::remove(err);
}

}  // namespace
}  // namespace ebb
