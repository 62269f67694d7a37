// Hostile and careless requests against the real `ebb serve` over real sockets (issue 9's findings
// 1, 2, 3, 7 and 9), and hostile files beside a model in its repository (issue 17's finding 4). Each
// test sends the request, checks the status and the message, checks that the server's memory after
// the request stays within a stated bound of before (and, where the finding was about memory, that
// its peak during the request did), and that a good request right after succeeds.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "server_process.h"
#include "test_util.h"

namespace ebb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::kMiB;

// RSS bounds are skipped under the sanitizers (testing::kRssBoundsHold), and only they.

// A field of /proc/<pid>/status in bytes ("VmRSS", "VmHWM"); -1 when unreadable.
int64_t ProcStatusBytes(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  }
  return -1;
}

// Resets the high-water mark of the process's RSS (VmHWM) to its current RSS.
void ResetPeakRss(pid_t pid) { std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5"; }

const std::string kGoodTiny = [] {
  return json{{"inputs", {{{"name", "x"}, {"shape", {1, 64}}, {"datatype", "FP32"}, {"data", std::vector<float>(64, 0.5f)}}}}}
      .dump();
}();

class HostileInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path root = fs::path(::testing::TempDir()) / ("ebb_hostile_" + std::to_string(getpid()));
    fs::remove_all(root);
    const std::string models = EBB_MODELS_DIR;
    // tiny_copy has the same bytes as tiny: one session, two names (finding 9).
    for (const char* name : {"tiny", "tiny_copy", "waifu2x_scale2x", "wrong_shape"}) fs::create_directories(root / name);
    fs::copy_file(models + "/tiny/model.onnx", root / "tiny" / "model.onnx");
    fs::copy_file(models + "/tiny/model.onnx", root / "tiny_copy" / "model.onnx");
    fs::copy_file(models + "/waifu2x_scale2x/model.onnx", root / "waifu2x_scale2x" / "model.onnx");
    fs::copy_file(testing::TestModelPath("wrong_shape"), root / "wrong_shape" / "model.onnx");
    std::ofstream(root / "waifu2x_scale2x" / "config.json") << R"({"kind": "image_to_image"})";
    repository_ = root.string();
    server_ = new testing::ServerProcess();
    ASSERT_TRUE(server_->Start({"--repository", repository_, "--max-body-bytes", "64000000"}));
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Stop(SIGTERM), 0);
    delete server_;
    fs::remove_all(repository_);
  }

  static httplib::Result Post(const std::string& path, const std::string& body) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(60, 0);
    c.set_write_timeout(60, 0);
    return c.Post(path.c_str(), body, "application/json");
  }

  // Sends `body` to `path`, expects `status` with `fragment` in the error, memory within bounds,
  // and a good request to tiny right after.
  static void ExpectRefused(const std::string& path, const std::string& body, int status, const std::string& fragment,
                            int64_t peak_bound = -1) {
    const pid_t pid = server_->pid();
    ASSERT_EQ(Post("/v2/models/tiny/infer", kGoodTiny)->status, 200);  // warm: the model and the pools
    const int64_t before = ProcStatusBytes(pid, "VmRSS");
    ResetPeakRss(pid);
    auto res = Post(path, body);
    ASSERT_TRUE(res) << "no answer: the server died (" << httplib::to_string(res.error()) << ")";
    EXPECT_EQ(res->status, status) << res->body.substr(0, 300);
    EXPECT_NE(res->body.find(fragment), std::string::npos) << res->body.substr(0, 300);
    const int64_t peak = ProcStatusBytes(pid, "VmHWM");
    const int64_t after = ProcStatusBytes(pid, "VmRSS");
    if (testing::kRssBoundsHold) {
      // Bound: 64 MiB over the RSS before (thread stacks, malloc arenas of the HTTP threads).
      EXPECT_LT(after, before + 64 * kMiB) << "RSS before " << before << ", after " << after;
      if (peak_bound >= 0) {
        EXPECT_LT(peak - before, peak_bound) << "RSS before " << before << ", peak " << peak;
      }
    }
    auto good = Post("/v2/models/tiny/infer", kGoodTiny);
    ASSERT_TRUE(good);
    EXPECT_EQ(good->status, 200) << good->body;
  }

  static inline std::string repository_;
  static inline testing::ServerProcess* server_ = nullptr;
};

// ---- Finding 1: deep nesting crashed the server (recursive serialisation of the excerpt) ----------

std::string Nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST_F(HostileInputTest, DeepNestingInAnyFieldIsRefusedAndTheServerKeepsServing) {
  const std::string deep = Nested(100000);  // 200 KB
  struct Case {
    const char* field;
    std::string body;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {"id", R"({"id":)" + deep + R"(,"inputs":[]})", "nested more than 32 levels deep"},
      {"model_name", R"({"model_name":)" + deep + R"(,"inputs":[]})", "nested more than 32 levels deep"},
      {"parameters", R"({"parameters":{"a":)" + deep + R"(},"inputs":[]})", "nested more than 32 levels deep"},
      {"outputs", R"({"inputs":[],"outputs":)" + deep + "}", "nested more than 32 levels deep"},
      {"inputs", R"({"inputs":)" + deep + "}", "inputs[0] must be an object"},
      {"input name", R"({"inputs":[{"name":)" + deep + "}]}", "nested more than 32 levels deep"},
      {"shape", R"({"inputs":[{"name":"x","shape":)" + deep + "}]}", "nested more than 32 levels deep"},
      {"data", R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":)" + deep + "}]}",
       "'data' is nested more than 64 levels deep"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    ExpectRefused("/v2/models/tiny/infer", c.body, 400, c.fragment);
  }
}

// ---- Finding 2: a huge body became a JSON tree of ~90 bytes per byte -------------------------------

TEST_F(HostileInputTest, TwentyMegabytesOfOpenBracketsCostNoMemory) {
  // Old: 200 MB of '[' drove RSS to 22.9 GB; 20 MB to about 2 GB. A bare '[' at the root is refused as
  // "must be a JSON object", so the brackets open under a member.
  const std::string body = R"({"id":)" + std::string(20'000'000, '[');
  ExpectRefused("/v2/models/tiny/infer", body, 400, "nested more than 32 levels deep",
                /*peak_bound=*/3 * static_cast<int64_t>(body.size()) + 32 * kMiB);
}

TEST_F(HostileInputTest, ATwentyMegabyteArrayUnderAnUnusedKeyIsNeverATree) {
  std::string body = R"({"unused":[0)";
  body.reserve(20'000'100);
  while (body.size() < 20'000'000) body += ",0";
  body += "]}";
  // Old: peaked at 1.8 GB and kept 1.4 GB. Bound: the body, its copies in the transport, 32 MiB.
  ExpectRefused("/v2/models/tiny/infer", body, 400, "request has no 'inputs'",
                /*peak_bound=*/3 * static_cast<int64_t>(body.size()) + 32 * kMiB);
}

TEST_F(HostileInputTest, AShapeThatClaimsMoreThanTheDataHoldsAllocatesNothing) {
  // 10^9 FP64 elements would be 8 GB; the data holds one.
  const std::string body = R"({"inputs":[{"name":"x","shape":[1000000000],"datatype":"FP64","data":[1]}]})";
  ExpectRefused("/v2/models/tiny/infer", body, 400, "'data' has 1 elements but shape [1000000000] needs 1000000000",
                /*peak_bound=*/32 * kMiB);
}

// ---- Finding 3: a zero dimension in an image batch made N empty runs ------------------------------

TEST_F(HostileInputTest, AZeroDimensionInAnImageBatchIsRefused) {
  for (const char* shape : {"[10000000,0,1,1]", "[1099511627776,0,1,1]", "[2,3,0,8]", "[1,3,8,0]"}) {
    SCOPED_TRACE(shape);
    const std::string body =
        std::string(R"({"inputs":[{"name":"x","shape":)") + shape + R"(,"datatype":"FP32","data":[]}]})";
    ExpectRefused("/v2/models/waifu2x_scale2x/infer", body, 400, "must be [N,C,H,W] with every dimension >= 1",
                  /*peak_bound=*/32 * kMiB);
  }
}

// ---- Finding 7: keep_alive overflowed when converted to nanoseconds ------------------------------

TEST_F(HostileInputTest, AnOutOfRangeKeepAliveIsRefusedAndTheLongestOneKeepsTheModel) {
  for (const char* value : {"9223372036854775807", "1e13", "31536000001"}) {
    SCOPED_TRACE(value);
    const std::string body = R"({"parameters":{"keep_alive":)" + std::string(value) + "}," + kGoodTiny.substr(1);
    ExpectRefused("/v2/models/tiny/infer", body, 400, "keep_alive must be an integer (milliseconds) of at most 31536000000");
  }
  // The longest accepted keep-alive: still loaded after several reaper rounds (50 ms each).
  const std::string longest = R"({"parameters":{"keep_alive":31536000000},)" + kGoodTiny.substr(1);
  ASSERT_EQ(Post("/v2/models/tiny/infer", longest)->status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  httplib::Client c("127.0.0.1", server_->port());
  auto ready = c.Get("/v2/models/tiny/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200) << ready->body;
}

// ---- Finding 9: two folders with identical bytes share a session; errors name the right one ------

TEST_F(HostileInputTest, ModelsSharingASessionKeepTheirOwnNames) {
  ASSERT_EQ(Post("/v2/models/tiny/infer", kGoodTiny)->status, 200);
  std::string zeros = "0";
  for (int i = 1; i < 64; ++i) zeros += ",0";
  const std::string body = R"({"inputs":[{"name":"y","shape":[1,64],"datatype":"FP32","data":[)" + zeros + "]}]}";
  for (const char* name : {"tiny_copy", "tiny"}) {
    SCOPED_TRACE(name);
    auto res = Post(std::string("/v2/models/") + name + "/infer", body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400);
    EXPECT_NE(res->body.find(std::string("model '") + name + "' has no input named 'y'"), std::string::npos) << res->body;
    const std::string other = std::string(name) == "tiny" ? "tiny_copy" : "tiny";
    EXPECT_EQ(res->body.find("'" + other + "'"), std::string::npos) << res->body;
    httplib::Client c("127.0.0.1", server_->port());
    auto meta = c.Get((std::string("/v2/models/") + name).c_str());
    ASSERT_TRUE(meta);
    EXPECT_EQ(json::parse(meta->body)["name"], name);
  }
  auto good = Post("/v2/models/tiny_copy/infer", kGoodTiny);
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200);
  EXPECT_EQ(json::parse(good->body)["model_name"], "tiny_copy");
}

// ---- Round three (issue 17), finding 9: the smaller ones -----------------------------------------

// Two Inference-Header-Content-Length headers that disagree: which one counts would be a guess (a
// proxy may guess the other way), so the request is refused, as two Content-Lengths are.
TEST_F(HostileInputTest, DisagreeingInferenceHeaderContentLengthsAreRefused) {
  const std::string header = json{{"inputs", {{{"name", "x"}, {"shape", {1, 64}}, {"datatype", "FP32"},
                                               {"parameters", {{"binary_data_size", 256}}}}}}}
                                 .dump();
  const std::string body = header + std::string(256, '\0');
  httplib::Client c("127.0.0.1", server_->port());
  const std::string length = std::to_string(header.size());
  auto refused = c.Post("/v2/models/tiny/infer",
                        {{"Inference-Header-Content-Length", length}, {"Inference-Header-Content-Length", "3"}}, body,
                        "application/octet-stream");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(refused->body.find("Inference-Header-Content-Length is sent twice with different values"),
            std::string::npos)
      << refused->body;
  auto same = c.Post("/v2/models/tiny/infer",
                     {{"Inference-Header-Content-Length", length}, {"Inference-Header-Content-Length", length}}, body,
                     "application/octet-stream");
  ASSERT_TRUE(same);
  EXPECT_EQ(same->status, 200) << "the same value twice is one value: " << same->body;
}

// A long name is not echoed whole: the message carries its first 128 bytes and its length.
TEST_F(HostileInputTest, ALongModelNameIsNotEchoedWhole) {
  const std::string name(7000, 'n');
  httplib::Client c("127.0.0.1", server_->port());
  auto res = c.Get(("/v2/models/" + name + "/ready").c_str());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("invalid model name '" + name.substr(0, 128) + "... (7000 bytes)'"), std::string::npos)
      << res->body.substr(0, 400);
  EXPECT_LT(res->body.size(), 600u);
  EXPECT_EQ(Post("/v2/models/tiny/infer", kGoodTiny)->status, 200);
}

// A model whose declared static output shape is wrong runs as plain ORT runs it (ebb wrote into a
// buffer of the declared shape, and every request failed).
TEST_F(HostileInputTest, AModelWithAWrongDeclaredOutputShapeIsServed) {
  const std::string body = R"({"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]},)"
                           R"({"name":"s","shape":[2],"datatype":"INT64","data":[1,4]}]})";
  for (int i = 0; i < 2; ++i) {
    auto res = Post("/v2/models/wrong_shape/infer", body);
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json out = json::parse(res->body)["outputs"][0];
    EXPECT_EQ(out["shape"], json::parse("[1,4]"));
    EXPECT_EQ(out["data"], json::parse("[1,2,3,4]"));
  }
}

// ---- Round four (issue 32), finding 4: a client set a 10.8 GB tile through the load API ------------

// `{"tile":{"size":30000,"overlap":0}}` (inside the documented 0..65536) and one 16x16 image built a
// 1x3x30000x30000 tile of repeated edge pixels (RSS past 6 GB); 65536 gave a 500 bad_alloc. The tile
// is clamped to the image: the answer is the image's, with memory bounded, and the server keeps serving.
TEST_F(HostileInputTest, AHugeTileSetThroughTheLoadApiIsClampedToTheImage) {
  const pid_t pid = server_->pid();
  const json image = {{"inputs", {{{"name", "x"}, {"shape", {1, 3, 16, 16}}, {"datatype", "FP32"},
                                   {"data", std::vector<float>(3 * 16 * 16, 0.5f)}}}}};
  for (const int size : {30000, 65536}) {
    SCOPED_TRACE(size);
    const std::string config = R"({"kind":"image_to_image","tile":{"size":)" + std::to_string(size) + R"(,"overlap":0}})";
    auto load = Post("/v2/repository/models/waifu2x_scale2x/load", json{{"parameters", {{"config", config}}}}.dump());
    ASSERT_TRUE(load);
    ASSERT_EQ(load->status, 200) << load->body;
    const int64_t before = ProcStatusBytes(pid, "VmRSS");
    ResetPeakRss(pid);
    auto res = Post("/v2/models/waifu2x_scale2x/infer", image.dump());
    ASSERT_TRUE(res) << "no answer: the server died";
    ASSERT_EQ(res->status, 200) << res->body.substr(0, 300);
    EXPECT_EQ(json::parse(res->body)["outputs"][0]["shape"], json::parse("[1,3,32,32]"));
    if (testing::kRssBoundsHold) {
      EXPECT_LT(ProcStatusBytes(pid, "VmHWM") - before, 64 * kMiB) << "a tile of the image's size, not " << size;
    }
  }
  auto restore = Post("/v2/repository/models/waifu2x_scale2x/load",
                      json{{"parameters", {{"config", R"({"kind":"image_to_image"})"}}}}.dump());
  ASSERT_TRUE(restore);
  EXPECT_EQ(restore->status, 200) << restore->body;
  auto good = Post("/v2/models/tiny/infer", kGoodTiny);
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200);
}

// ---- Issue 17, finding 4: files beside a model escaped confinement ----------------------------------

// A repository whose model folders hold hostile files beside their model.onnx, served by its own
// `ebb serve`, which loads every model at start-up (where a FIFO config.json used to block it for good,
// before it opened its ports). The files are refused when the folder is read: the model is not served,
// its load fails with a message naming the file and the rule, and no byte of the file is read.
class FilesBesideAModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path root = fs::path(::testing::TempDir()) / ("ebb_beside_" + std::to_string(getpid()));
    fs::remove_all(root);
    outside_ = root.string() + "_outside";
    fs::remove_all(outside_);
    fs::create_directories(outside_);
    std::ofstream(outside_ + "/secret.txt") << "SECRET-0\nSECRET-1\nSECRET-2\nSECRET-3\n";
    const std::string models = EBB_MODELS_DIR;
    auto model = [&](const std::string& name, const std::string& source) {
      fs::create_directories(root / name);
      fs::copy_file(models + "/" + source + "/model.onnx", root / name / "model.onnx");
      return root / name;
    };
    model("tiny", "tiny");
    std::ofstream(model("labelled", "mixed") / "labels.txt") << "zero\none\ntwo\nthree\n";
    fs::create_symlink(root / "labelled" / "labels.txt", model("labels_link_inside", "mixed") / "labels.txt");
    fs::create_symlink(outside_ + "/secret.txt", model("labels_link_out", "mixed") / "labels.txt");
    ASSERT_EQ(mkfifo((model("labels_fifo", "mixed") / "labels.txt").c_str(), 0644), 0);
    std::ofstream(model("labels_huge", "mixed") / "labels.txt") << "x";
    fs::resize_file(root / "labels_huge" / "labels.txt", 5 * kMiB);  // sparse
    ASSERT_EQ(mkfifo((model("config_fifo", "tiny") / "config.json").c_str(), 0644), 0);
    fs::create_symlink("/dev/zero", model("config_zero", "tiny") / "config.json");
    std::ofstream(model("config_huge", "tiny") / "config.json") << "{";
    fs::resize_file(root / "config_huge" / "config.json", uintmax_t{1} << 30);  // 1 GiB, sparse
    // The model file itself, linked out of the repository, flat and in a version folder; a link
    // that stays inside (to another folder's model) is followed.
    fs::copy_file(models + "/tiny/model.onnx", outside_ + "/model.onnx");
    fs::create_directories(root / "model_link_out");
    fs::create_symlink(outside_ + "/model.onnx", root / "model_link_out" / "model.onnx");
    fs::create_directories(root / "version_link_out" / "1");
    fs::create_symlink(outside_ + "/model.onnx", root / "version_link_out" / "1" / "model.onnx");
    fs::create_directories(root / "model_link_inside");
    fs::create_symlink(root / "tiny" / "model.onnx", root / "model_link_inside" / "model.onnx");
    repository_ = root.string();
    stderr_path_ = root.string() + "_stderr.txt";
    server_ = new testing::ServerProcess();
    // Bounded: before, the FIFO made `ebb serve` wait forever before it opened its ports.
    const auto t0 = std::chrono::steady_clock::now();
    auto started =
        std::async(std::launch::async,
                   [] { return server_->Start({"--repository", repository_, "--confine-links"}, stderr_path_); });
    if (started.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      kill(server_->pid(), SIGKILL);
      started.wait();
      FAIL() << "ebb serve did not open its ports within 60 s";
    }
    ASSERT_TRUE(started.get()) << "ebb serve did not start";
    start_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Stop(SIGTERM), 0);
    delete server_;
    fs::remove_all(repository_);
    fs::remove_all(outside_);
    fs::remove(stderr_path_);
  }

  static httplib::Result Post(const std::string& path, const std::string& body) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(30, 0);
    return c.Post(path.c_str(), body, "application/json");
  }

  // An inference on a copy of `mixed` (sum = a + b + c) whose output asks for the top `classes` classes.
  static json MixedRequest(int classes) {
    const json a = {{"name", "a"}, {"shape", {1, 4}}, {"datatype", "FP32"}, {"data", {1, 9, 3, 4}}};
    const json b = {{"name", "b"}, {"shape", {1, 4}}, {"datatype", "INT64"}, {"data", {0, 0, 0, 0}}};
    const json c = {{"name", "c"}, {"shape", {1, 4}}, {"datatype", "UINT8"}, {"data", {0, 0, 0, 0}}};
    const json flag = {{"name", "flag"}, {"shape", {1, 4}}, {"datatype", "BOOL"}, {"data", {true, true, true, true}}};
    return {{"inputs", {a, b, c, flag}},
            {"outputs", {{{"name", "sum"}, {"parameters", {{"classification", classes}}}}}}};
  }

  static inline std::string repository_, outside_, stderr_path_;
  static inline double start_seconds_ = 0;
  static inline testing::ServerProcess* server_ = nullptr;
};

struct BesideCase {
  const char* model;
  const char* fragment;  // of the message, after the file's path
};
const std::vector<BesideCase> kBesideCases = {
    {"labels_link_out", "labels.txt' resolves outside"},
    {"labels_fifo", "labels.txt' is a FIFO, not a regular file: refused"},
    {"labels_huge", "labels.txt' is 5242880 bytes, larger than the limit of 4 MiB for labels.txt: refused"},
    {"config_fifo", "config.json' is a FIFO, not a regular file: refused"},
    {"config_zero", "config.json' resolves outside"},
    {"config_huge", "config.json' is 1073741824 bytes, larger than the limit of 64 KiB for config.json: refused"},
    {"model_link_out", "model.onnx is a link that resolves outside the repository"},
    {"version_link_out", "1/model.onnx is a link that resolves outside the repository"},
};

TEST_F(FilesBesideAModelTest, TheServerOpensItsPortsAndWarnsOfEachRefusedFile) {
  EXPECT_LT(start_seconds_, 30.0);
  std::ifstream in(stderr_path_);
  const std::string log((std::istreambuf_iterator<char>(in)), {});
  for (const BesideCase& c : kBesideCases) {
    SCOPED_TRACE(c.model);
    const size_t at = log.find(std::string("folder '") + c.model + "' of the repository is not served: ");
    ASSERT_NE(at, std::string::npos) << log;
    const std::string line = log.substr(at, log.find('\n', at) - at);
    EXPECT_NE(line.find(c.fragment), std::string::npos) << line;
  }
  EXPECT_EQ(log.find("SECRET"), std::string::npos) << log;
  httplib::Client client("127.0.0.1", server_->port());
  auto ready = client.Get("/v2/health/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  auto good = Post("/v2/models/tiny/infer", kGoodTiny);
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200) << good->body;
  auto inside = Post("/v2/models/model_link_inside/infer", kGoodTiny);
  ASSERT_TRUE(inside);
  EXPECT_EQ(inside->status, 200) << "a link inside the repository is followed: " << inside->body;
}

TEST_F(FilesBesideAModelTest, EachLoadIsRefusedAtOnceNamingTheFileWithMemoryBounded) {
  const pid_t pid = server_->pid();
  ASSERT_EQ(Post("/v2/models/tiny/infer", kGoodTiny)->status, 200);
  for (const BesideCase& c : kBesideCases) {
    SCOPED_TRACE(c.model);
    const int64_t before = ProcStatusBytes(pid, "VmRSS");
    ResetPeakRss(pid);
    const auto t0 = std::chrono::steady_clock::now();
    auto res = Post(std::string("/v2/repository/models/") + c.model + "/load", "");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(res) << "no answer (" << httplib::to_string(res.error()) << ")";
    EXPECT_EQ(res->status, 400) << res->body;
    EXPECT_NE(res->body.find(c.fragment), std::string::npos) << res->body;
    EXPECT_LT(seconds, 5.0) << "refused without reading the file: milliseconds; 5 s for a loaded machine";
    const int64_t peak = ProcStatusBytes(pid, "VmHWM"), after = ProcStatusBytes(pid, "VmRSS");
    if (testing::kRssBoundsHold) {
      // Bounds: 16 MiB over the RSS before, at the peak and after (before, /dev/zero grew ~750 MiB/s).
      EXPECT_LT(peak - before, 16 * kMiB) << "RSS before " << before << ", peak " << peak;
      EXPECT_LT(after - before, 16 * kMiB) << "RSS before " << before << ", after " << after;
    }
    auto good = Post("/v2/models/tiny/infer", kGoodTiny);
    ASSERT_TRUE(good);
    EXPECT_EQ(good->status, 200) << good->body;
  }
}

TEST_F(FilesBesideAModelTest, ALabelsFileLinkedOutIsNeverServedAndOneLinkedInsideIs) {
  // Before: labels.txt -> /etc/shadow, and classification returned its lines.
  auto leaky = Post("/v2/models/labels_link_out/infer", MixedRequest(4).dump());
  ASSERT_TRUE(leaky);
  EXPECT_NE(leaky->status, 200) << leaky->body;
  EXPECT_NE(leaky->body.find("labels.txt' resolves outside"), std::string::npos) << leaky->body;
  EXPECT_EQ(leaky->body.find("SECRET"), std::string::npos) << leaky->body;
  auto index = Post("/v2/repository/index", "{}");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->body.find("SECRET"), std::string::npos) << index->body;
  // A link that stays inside the repository is followed: labels come out.
  auto inside = Post("/v2/models/labels_link_inside/infer", MixedRequest(2).dump());
  ASSERT_TRUE(inside);
  ASSERT_EQ(inside->status, 200) << inside->body;
  EXPECT_EQ(json::parse(inside->body)["outputs"][0]["data"], json({"9.000000:1:one", "4.000000:3:three"}))
      << inside->body;
}

}  // namespace
}  // namespace ebb
