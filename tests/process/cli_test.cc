// Black-box tests of the `ebb` executable: `ebb run` end to end and its
// errors, the model arguments every command takes, `--version`, `ebb demo`,
// and `make run`'s flags. Each case runs the real binary and checks its exit
// code, output files and messages.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "ebb/image.h"
#include "ebb/version.h"
#include "test_util.h"

namespace ebb {
namespace {

constexpr bool kHasBenchmarks = EBB_HAS_BENCHMARKS;


const std::string kModels = EBB_MODELS_DIR;
const std::string kFixtures = kModels + "/../tests/fixtures/";

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// `env`: what the shell puts before the binary (`env -u NAME NAME=value`), "" for none.
Outcome Ebb(const std::string& args, const std::string& env = "") {
  const std::string command = env + " " + std::string(EBB_BINARY) + " " + args + " 2>&1";
  Outcome o;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return o;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) o.output.append(buf.data(), n);
  int status = pclose(pipe);
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / ("ebb_cli_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(CliTest, RunUpscalesFramesAsOneOperationWithReportAndPlot) {
  const std::string in = kFixtures + "astronaut_96.png";
  Outcome o = Ebb("run " + kModels + "/waifu2x_scale2x -i " + in + " -i " + in + " -o " + Path("a.png") + " -o " +
                  Path("b.png") + " --tile 48 --overlap 8 --device cpu --memory-report " + Path("mem.json") +
                  " --plot " + Path("mem.svg"));
  ASSERT_EQ(o.exit_code, 0) << o.output;
  auto a = ReadImage(Path("a.png"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->width, 192);
  std::ifstream report_file(Path("mem.json"));
  nlohmann::json report = nlohmann::json::parse(report_file, nullptr, false);
  ASSERT_FALSE(report.is_discarded());
  const auto& samples = report["samples"];
  // "loaded", 2 frames x 9 tiles (96 = cores of 32: 3x3), "done".
  ASSERT_EQ(samples.size(), 20u);
  int releases = 0;
  for (size_t i = 1; i + 1 < samples.size(); ++i) releases += samples[i]["release"].get<bool>() ? 1 : 0;
  EXPECT_EQ(releases, 1);
  EXPECT_TRUE(samples[samples.size() - 2]["release"].get<bool>()) << "the release is at the last run";
  EXPECT_GT(report["reserved_peak"].get<int64_t>(), report["reserved_after"].get<int64_t>() + (1 << 20));
  std::ifstream svg_file(Path("mem.svg"));
  std::string svg((std::istreambuf_iterator<char>(svg_file)), {});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("release"), std::string::npos);
}

TEST_F(CliTest, RunRejectsAnUnreadableImage) {
  std::ofstream(Path("bad.png")) << "not a picture";
  Outcome o = Ebb("run " + kModels + "/waifu2x_scale2x -i " + Path("bad.png") + " -o " + Path("out.png"));
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.output.find("bad.png"), std::string::npos) << o.output;
  EXPECT_FALSE(std::filesystem::exists(Path("out.png")));
}

// Issue 32, findings 1 and 10: `--tile -5` was accepted, `--tile 65536` aborted on std::bad_alloc, a
// tile of 2^31 overflowed the heap, `-i /dev/zero` read 1 GiB before refusing, `-i FIFO` blocked.
TEST_F(CliTest, RunRefusesBadTilesAndInputsThatAreNotFilesAndClampsAHugeTile) {
  const std::string model = kModels + "/convnet";
  const std::string out = " -o " + Path("out.png");
  Outcome negative = Ebb("run " + model + " -i " + kFixtures + "astronaut_96.png" + out + " --tile -5");
  EXPECT_NE(negative.exit_code, 0);
  EXPECT_NE(negative.output.find("--tile"), std::string::npos) << negative.output;
  Outcome too_big = Ebb("run " + model + " -i " + kFixtures + "astronaut_96.png" + out + " --tile 2147483648");
  EXPECT_NE(too_big.exit_code, 0);
  EXPECT_NE(too_big.output.find("--tile"), std::string::npos) << too_big.output;
  EXPECT_FALSE(std::filesystem::exists(Path("out.png")));
  Outcome zero = Ebb("run " + model + " -i /dev/zero" + out);
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_NE(zero.output.find("character device"), std::string::npos) << zero.output;
  ASSERT_EQ(mkfifo(Path("fifo.png").c_str(), 0600), 0);
  Outcome fifo = Ebb("run " + model + " -i " + Path("fifo.png") + out);  // would block for good
  EXPECT_EQ(fifo.exit_code, 1);
  EXPECT_NE(fifo.output.find("FIFO"), std::string::npos) << fifo.output;
  // The largest tile allowed, over a 96x96 image: clamped to the image, one run.
  Outcome clamped = Ebb("run " + model + " -i " + kFixtures + "astronaut_96.png" + out + " --tile 65536 --overlap 8");
  EXPECT_EQ(clamped.exit_code, 0) << clamped.output;
  EXPECT_TRUE(std::filesystem::exists(Path("out.png")));
}

TEST_F(CliTest, RunRejectsImagesWhoseChannelsTheModelCannotTake) {
  Outcome o = Ebb("run " + kModels + "/twochannel -i " + kFixtures + "astronaut_96.png -o " + Path("out.png"));
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.output.find("channel"), std::string::npos) << o.output;
}

TEST_F(CliTest, RunRejectsAModelThatIsNotImageToImage) {
  Outcome o = Ebb("run " + kModels + "/tiny -i " + kFixtures + "astronaut_96.png -o " + Path("out.png"));
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.output.find("not image-to-image"), std::string::npos) << o.output;
}

TEST_F(CliTest, RunNeedsOneOutputPerInput) {
  Outcome o = Ebb("run " + kModels + "/waifu2x_scale2x -i " + kFixtures + "astronaut_96.png -i " + kFixtures +
                  "astronaut_96.png -o " + Path("out.png"));
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.output.find("one --output per --input"), std::string::npos) << o.output;
}

TEST_F(CliTest, PolicyPrintsTheEffectivePolicyAndRejectsTypos) {
  Outcome ok = Ebb("policy");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("\"release\": \"idle\""), std::string::npos) << ok.output;
  std::ofstream(Path("p.json")) << R"({"relase": "never"})";
  Outcome bad = Ebb("policy --policy " + Path("p.json"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("unknown policy key 'policy.relase'"), std::string::npos) << bad.output;
}

// The first `n` bytes of a file.
std::string Head(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(n, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(n));
  bytes.resize(static_cast<size_t>(in.gcount()));
  return bytes;
}
bool IsPngFile(const std::string& path) { return Head(path, 8) == std::string("\x89PNG\r\n\x1a\n", 8); }
bool IsJpegFile(const std::string& path) { return Head(path, 3) == "\xff\xd8\xff"; }

// The JSON document in `output` (which may hold log lines before it).
nlohmann::json JsonIn(const std::string& output) {
  const size_t at = output.find('{');
  return nlohmann::json::parse(at == std::string::npos ? "" : output.substr(at), nullptr, false);
}

TEST_F(CliTest, RunWritesTheFormatTheOutputExtensionNames) {
  // A 32x32 crop of the photo, one 40-px tile per frame: quick.
  auto photo = ReadImage(kFixtures + "astronaut_96.png");
  ASSERT_TRUE(photo.ok());
  Image crop{32, 32, photo->channels, {}};
  for (int y = 0; y < 32; ++y) {
    const auto row = photo->pixels.begin() + static_cast<std::ptrdiff_t>(y) * photo->width * photo->channels;
    crop.pixels.insert(crop.pixels.end(), row, row + 32 * photo->channels);
  }
  ASSERT_TRUE(WritePng(Path("in.png"), crop).ok());
  const std::string in = Path("in.png");
  Outcome o = Ebb("run waifu2x_scale2x --models " + kModels + " -i " + in + " -i " + in + " -i " + in + " -o " +
                  Path("a.png") + " -o " + Path("b.jpg") + " -o " + Path("c.JPEG") +
                  " --tile 40 --overlap 4 --device cpu");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_TRUE(IsPngFile(Path("a.png")));
  EXPECT_TRUE(IsJpegFile(Path("b.jpg")));
  EXPECT_TRUE(IsJpegFile(Path("c.JPEG")));
  auto png = ReadImage(Path("a.png"));
  auto jpeg = ReadImage(Path("b.jpg"));
  ASSERT_TRUE(png.ok() && jpeg.ok());
  ASSERT_EQ(jpeg->width, 64);
  ASSERT_EQ(jpeg->pixels.size(), png->pixels.size());
  double diff = 0;  // the same picture, up to JPEG's loss
  for (size_t i = 0; i < png->pixels.size(); ++i) diff += std::abs(int{png->pixels[i]} - int{jpeg->pixels[i]});
  EXPECT_LT(diff / static_cast<double>(png->pixels.size()), 4.0);
}

TEST_F(CliTest, RunRefusesAnUnknownOutputExtensionBeforeAnyWork) {
  const std::string in = kFixtures + "astronaut_96.png";
  // The model does not exist: the extension is checked first, so its error is
  // the one reported, and no output is written.
  Outcome o = Ebb("run " + Path("no_such_model") + " -i " + in + " -i " + in + " -o " + Path("a.png") + " -o " +
                  Path("b.bmp"));
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.output.find("unknown image extension '.bmp' (use .png, .jpg or .jpeg)"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("not found"), std::string::npos) << o.output;
  EXPECT_FALSE(std::filesystem::exists(Path("a.png")));
  Outcome none = Ebb("run " + kModels + "/waifu2x_scale2x -i " + in + " -o " + Path("out"));
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.output.find("no file extension"), std::string::npos) << none.output;
  EXPECT_EQ(none.output.find("->"), std::string::npos) << "nothing ran: " << none.output;
  // Issue 34: an output into a folder that is not there is the caller's error, found before any work.
  for (const std::string& flags : {" -o " + Path("no_such_folder/a.png"),
                                   " -o " + Path("a.png") + " --memory-report " + Path("no_such_folder/m.json"),
                                   " -o " + Path("a.png") + " --plot " + Path("no_such_folder/p.svg")}) {
    Outcome missing = Ebb("run " + kModels + "/waifu2x_scale2x -i " + in + flags);
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.output.find("invalid_argument: cannot write"), std::string::npos) << missing.output;
    EXPECT_NE(missing.output.find("there is no folder '" + Path("no_such_folder") + "'"), std::string::npos)
        << missing.output;
    EXPECT_EQ(missing.output.find("->"), std::string::npos) << "nothing ran: " << missing.output;
  }
  Outcome quality = Ebb("run " + Path("no_such_model") + " -i " + in + " -o " + Path("a.jpg") + " --jpeg-quality 0");
  EXPECT_EQ(quality.exit_code, 1);
  EXPECT_NE(quality.output.find("--jpeg-quality must be 1..100"), std::string::npos) << quality.output;
}

TEST_F(CliTest, EveryCommandTakesAModelFileAFolderOrAName) {
  const std::string folder = kModels + "/tiny";
  for (const std::string& model : {folder, folder + "/", folder + "/model.onnx", std::string("tiny")}) {
    SCOPED_TRACE(model);
    Outcome o = Ebb("info " + model + " --models " + kModels + " --device cpu");
    ASSERT_EQ(o.exit_code, 0) << o.output;
    nlohmann::json info = JsonIn(o.output);
    ASSERT_FALSE(info.is_discarded()) << o.output;
    EXPECT_EQ(info["name"], "tiny");
    EXPECT_EQ(info["inputs"][0]["name"], "x");
  }
  const std::string convnet = kModels + "/convnet";
  // The bench commands are not built in the sanitizer builds (EBB_BUILD_BENCHMARKS=OFF).
  const std::vector<std::string> bench_models =
      kHasBenchmarks ? std::vector<std::string>{convnet, convnet + "/model.onnx", "convnet"} : std::vector<std::string>{};
  const std::vector<std::string> http_models =
      kHasBenchmarks ? std::vector<std::string>{folder, folder + "/model.onnx"} : std::vector<std::string>{};
  for (const std::string& model : bench_models) {
    SCOPED_TRACE(model);
    Outcome o = Ebb("bench overhead --model " + model + " --models " + kModels +
                    " --device cpu --size 32 --iterations 2");
    ASSERT_EQ(o.exit_code, 0) << o.output;
    EXPECT_EQ(JsonIn(o.output)["iterations"], 2) << o.output;
  }
  for (const std::string& model : http_models) {  // served through a repository
    SCOPED_TRACE(model);
    Outcome o = Ebb("bench http --model " + model + " --device cpu --iterations 3");
    ASSERT_EQ(o.exit_code, 0) << o.output;
    nlohmann::json j = JsonIn(o.output);
    EXPECT_EQ(j["failures"], 0) << o.output;
    // The tiny request's figures stay, with no goal (issue 38 retired them), and no raw exchange without --size.
    EXPECT_TRUE(j.contains("overhead_over_health_live")) << o.output;
    EXPECT_EQ(j["goals"], nlohmann::json::object()) << o.output;
    EXPECT_FALSE(j.contains("raw_exchange")) << o.output;
  }
  if (kHasBenchmarks) {  // --size on a model of fixed shape (tiny's [1,64]) is refused, not measured as tiny
    for (const std::string bench : {"http", "grpc"}) {
      Outcome o = Ebb("bench " + bench + " --models " + kModels + " --device cpu --size 16 --iterations 3");
      EXPECT_NE(o.exit_code, 0) << o.output;
      EXPECT_NE(o.output.find("--model convnet"), std::string::npos) << o.output;
    }
  }
  Outcome file = Ebb("run " + kModels + "/waifu2x_scale2x/model.onnx -i " + kFixtures + "astronaut_96.png -o " +
                     Path("file.png") + " --device cpu");
  ASSERT_EQ(file.exit_code, 0) << file.output;
  EXPECT_TRUE(IsPngFile(Path("file.png")));
}

// `bench http` and `bench grpc` with an image-sized request (--size) time a raw loopback exchange of
// the request's and the reply's bytes among the real requests, and judge each transport's overhead
// against it. Both run their server under `ebb serve`'s release (idle); `bench http` judges its goal
// with the lean client (cpp-httplib's figures kept beside it) and counts a real `ebb serve`'s page
// faults per request.
TEST_F(CliTest, TransportBenchesCompareAnImageSizedRequestWithARawExchange) {
  if (!kHasBenchmarks) GTEST_SKIP() << "the bench commands are not built in the sanitizer builds";
  const size_t tensor_bytes = 3 * 16 * 16 * sizeof(float);  // convnet's input and output at --size 16
  std::vector<std::pair<std::string, std::string>> benches = {{"http", "http_binary_overhead_at_most_2x_raw"}};
  if (Ebb("bench grpc --help").exit_code == 0) benches.push_back({"grpc", "grpc_raw_overhead_at_most_3x_raw"});
  for (const auto& [bench, goal] : benches) {
    SCOPED_TRACE(bench);
    Outcome o =
        Ebb("bench " + bench + " --model convnet --models " + kModels + " --size 16 --device cpu --iterations 5");
    ASSERT_EQ(o.exit_code, 0) << o.output;
    nlohmann::json j = JsonIn(o.output);
    ASSERT_TRUE(j.contains("raw_exchange")) << o.output;
    EXPECT_EQ(j["failures"], 0) << o.output;
    const nlohmann::json& raw = j["raw_exchange"];
    // The tensor's bytes and its framing (a JSON header and HTTP's head, or the protobuf's fields).
    for (const char* bytes : {"request_bytes", "reply_bytes"}) {
      EXPECT_GT(raw[bytes].get<size_t>(), tensor_bytes) << bytes << ": " << o.output;
      EXPECT_LT(raw[bytes].get<size_t>(), tensor_bytes + 1024) << bytes << ": " << o.output;
    }
    EXPECT_GT(raw["p50_us"].get<double>(), 0) << o.output;
    EXPECT_GT(raw["again_p50_us"].get<double>(), 0) << o.output;
    EXPECT_DOUBLE_EQ(raw["aa_ratio"].get<double>(), raw["again_p50_us"].get<double>() / raw["p50_us"].get<double>());
    EXPECT_EQ(j["release"], "idle") << o.output;
    ASSERT_EQ(j["goals"].size(), bench == "http" ? 2u : 1u) << o.output;
    if (bench == "http") {
      EXPECT_GT(j["httplib_binary_p50_us"].get<double>(), 0) << o.output;
      EXPECT_EQ(j["serve"]["failures"], 0) << o.output;
      EXPECT_EQ(j["serve"]["requests"], 100) << o.output;
      EXPECT_GE(j["serve_faults_per_request"].get<double>(), 0) << o.output;
      const nlohmann::json& faults = j["goals"]["serve_faults_per_request_at_most_20"];
      EXPECT_TRUE(faults["met"].is_boolean()) << o.output;
      EXPECT_DOUBLE_EQ(faults["value"].get<double>(), j["serve_faults_per_request"].get<double>()) << o.output;
    }
    const nlohmann::json& g = j["goals"][goal];
    EXPECT_TRUE(g["met"].is_boolean()) << o.output;
    const char* ratio = bench == "http" ? "binary_overhead_over_raw" : "grpc_overhead_over_raw";
    EXPECT_DOUBLE_EQ(g["value"].get<double>(), j[ratio].get<double>()) << o.output;
    const char* overhead = bench == "http" ? "binary_overhead_p50_us" : "grpc_overhead_p50_us";
    EXPECT_DOUBLE_EQ(j[ratio].get<double>(), j[overhead].get<double>() / raw["p50_us"].get<double>()) << o.output;
  }
}

TEST_F(CliTest, OnnxRuntimesTelemetryStaysOffUnlessTheUserSetsItsVariable) {
  // Without ebb's opt-out, ORT 1.29's first environment writes a device id and an event database under
  // $HOME/.cache/Microsoft/DeveloperTools/.onnxruntime and starts an uploader thread (measured with a
  // bare C program against the same library: the folder appears; with ORT_DISABLE_TELEMETRY=1 it does not).
  const std::string home = Path("home");
  std::filesystem::create_directories(home);
  const std::string env = "env -u XDG_CACHE_HOME -u EBB_CACHE_DIR -u ORT_DISABLE_TELEMETRY HOME=" + home;
  Outcome info = Ebb("info tiny --models " + kModels + " --device cpu", env);
  ASSERT_EQ(info.exit_code, 0) << info.output;
  Outcome run = Ebb("run " + kModels + "/waifu2x_scale2x -i " + kFixtures + "astronaut_96.png -o " +
                        Path("out.png") + " --device cpu",
                    env);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(std::filesystem::exists(home + "/.cache/ebb")) << "ebb's own cache: the runs used this HOME";
  EXPECT_FALSE(std::filesystem::exists(home + "/.cache/Microsoft")) << "ONNX Runtime's telemetry wrote its files";
}

// A model with ONNX external data (issue 18): the conv model of about 1 MB of weights written by the
// tests' model tool in one file and with weights.bin beside model.onnx.
TEST_F(CliTest, InfoAndRunTakeAModelWithExternalData) {
  const std::string tool = std::string(EBB_SOURCE_DIR) + "/tools/make_test_models.py";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + tool + " --conv-mb 1 --external-mb 1 --out " + dir_.string() +
                         " > /dev/null").c_str()),
            0);
  const std::string ext = Path("conv_1mb_ext"), single = Path("conv_1mb");
  Outcome info = Ebb("info " + ext + " --device cpu");
  ASSERT_EQ(info.exit_code, 0) << info.output;
  nlohmann::json described = JsonIn(info.output);
  EXPECT_EQ(described["external_data"], nlohmann::json::array({ext + "/weights.bin"}));
  EXPECT_EQ(described["file_bytes"].get<int64_t>(),
            static_cast<int64_t>(std::filesystem::file_size(ext + "/model.onnx") +
                                 std::filesystem::file_size(ext + "/weights.bin")));
  EXPECT_EQ(JsonIn(Ebb("info " + single + " --device cpu").output)["external_data"], nlohmann::json::array());
  for (const std::string& model : {ext, single}) {
    Outcome run = Ebb("run " + model + " -i " + kFixtures + "astronaut_96.png -o " + model + ".png --device cpu");
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  EXPECT_EQ(Head(ext + ".png", 1 << 20), Head(single + ".png", 1 << 20)) << "the same weights, the same image";
  std::filesystem::remove(ext + "/weights.bin");
  Outcome missing = Ebb("info " + ext + " --device cpu");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("external-data file 'weights.bin'"), std::string::npos) << missing.output;
  EXPECT_NE(missing.output.find("does not exist"), std::string::npos) << missing.output;
}

TEST_F(CliTest, AMissingModelIsTheSameClearErrorInEveryCommand) {
  const std::string missing = "no_such_model";
  const std::string message = "model 'no_such_model' not found: no such model file or model folder, and no folder "
                              "'no_such_model' under --models '" + kModels + "'";
  std::vector<std::string> commands = {"info " + missing,
                                       "run " + missing + " -i " + kFixtures + "astronaut_96.png -o " + Path("o.png")};
  if (kHasBenchmarks) {  // not built in the sanitizer builds
    for (const char* bench : {"overhead", "floor", "release", "http", "switch", "sessions"}) {
      commands.push_back(std::string("bench ") + bench + " --model " + missing);
    }
  }
  for (const std::string& command : commands) {
    SCOPED_TRACE(command);
    Outcome o = Ebb(command + " --models " + kModels + " --device cpu");
    EXPECT_EQ(o.exit_code, 1);
    EXPECT_NE(o.output.find(message), std::string::npos) << o.output;
  }
  Outcome path = Ebb("info " + Path("nope.onnx"));
  EXPECT_EQ(path.exit_code, 1);
  EXPECT_NE(path.output.find("no such model file or model folder"), std::string::npos) << path.output;
  Outcome empty = Ebb("info " + dir_.string());
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.output.find("has no model.onnx"), std::string::npos) << empty.output;
  Outcome demo = Ebb("demo --models " + dir_.string() + " --device cpu");
  EXPECT_EQ(demo.exit_code, 1);
  EXPECT_NE(demo.output.find("model 'convnet' not found"), std::string::npos) << demo.output;
}

TEST_F(CliTest, MakeRunTakesHostAndPort) {
  // A dry run (-n) prints the commands `make run` would run, and runs none.
  auto make_run = [](const std::string& args) {
    const std::string command = "make -n -s -C " + std::string(EBB_SOURCE_DIR) + " run BUILD=out " + args + " 2>&1";
    std::string output;
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) return output;
    std::array<char, 4096> buf;
    while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
    pclose(pipe);
    return output;
  };
  const std::string custom = make_run("HOST=0.0.0.0 PORT=9123 GRPC_PORT=9124");
  EXPECT_NE(custom.find("out/ebb serve --repository models --host 0.0.0.0 --port 9123 --grpc-port 9124"),
            std::string::npos)
      << custom;
  const std::string defaults = make_run("");
  EXPECT_NE(defaults.find("out/ebb serve --repository models --host 127.0.0.1 --port 8000 --grpc-port 8001"),
            std::string::npos)
      << defaults;
}

// A listening socket on a free loopback port, held for the test's life.
class TakenPort {
 public:
  TakenPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd_, 1) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      return;
    }
    port_ = ntohs(address.sin_port);
  }
  ~TakenPort() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_F(CliTest, APortInUseIsOneLineNamingThePortAndTheFlag) {
  TakenPort taken;
  ASSERT_GT(taken.port(), 0);
  const std::string port = std::to_string(taken.port());
  const std::string serve = "serve --repository " + dir_.string() + " --host 127.0.0.1 ";
  // HTTP: the port taken, gRPC off.
  Outcome http = Ebb(serve + "--port " + port + " --grpc-port 0");
  EXPECT_EQ(http.exit_code, 1) << http.output;
  EXPECT_EQ(Lines(http.output),
            std::vector<std::string>{"ebb: error: unavailable: HTTP cannot listen on 127.0.0.1:" + port +
                                     ": Address already in use (choose another port with --port)"})
      << http.output;
  // gRPC: HTTP on a free port, gRPC on the taken one; gRPC core logs nothing of its own.
  Outcome grpc = Ebb(serve + "--port 0 --grpc-port " + port);
  EXPECT_EQ(grpc.exit_code, 1) << grpc.output;
  EXPECT_EQ(Lines(grpc.output),
            std::vector<std::string>{"ebb: error: unavailable: gRPC cannot listen on 127.0.0.1:" + port +
                                     ": Address already in use (choose another port with --grpc-port)"})
      << grpc.output;
}

TEST_F(CliTest, VersionPrintsEbbOnnxRuntimeAndTheProvidersThisBuildCanUse) {
  Outcome o = Ebb("--version");
  ASSERT_EQ(o.exit_code, 0) << o.output;
  std::vector<std::string> lines;
  std::istringstream text(o.output);
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u) << o.output;
  EXPECT_EQ(lines[0], std::string("ebb ") + EBB_PROJECT_VERSION);
  EXPECT_EQ(Version(), std::string(EBB_PROJECT_VERSION));
  // ORT's run-time version agrees with the headers ebb was built against.
  EXPECT_EQ(lines[1].rfind("ONNX Runtime 1." + std::to_string(EBB_ORT_API_VERSION) + ".", 0), 0u) << lines[1];
  EXPECT_EQ(lines[1], "ONNX Runtime " + OrtVersion());
  EXPECT_EQ(lines[2].rfind("providers built into ONNX Runtime: ", 0), 0u) << lines[2];
  EXPECT_NE(lines[2].find("CPUExecutionProvider"), std::string::npos) << lines[2];
  // Whether the CUDA provider library is there decides what the next lines say.
  const bool installed = std::filesystem::exists(std::string(EBB_ORT_LIB_DIR) + "/libonnxruntime_providers_cuda.so");
  const bool loadable = lines[3].rfind("CUDA provider library: loadable (", 0) == 0;
  if (installed) {
    EXPECT_TRUE(loadable || lines[3].rfind("CUDA provider library: not loadable (", 0) == 0) << lines[3];
  } else {
    EXPECT_EQ(lines[3].rfind("CUDA provider library: missing (", 0), 0u) << lines[3];
  }
  EXPECT_EQ(lines[4], loadable ? "providers ebb can use: CUDAExecutionProvider, CPUExecutionProvider"
                               : "providers ebb can use: CPUExecutionProvider");
}

// The "arena reserved" MiB of the row starting with `row` in the section of
// `model` in `ebb demo`'s output; -1 when not found.
double DemoReservedMiB(const std::string& output, const std::string& model, const std::string& row) {
  const size_t section = output.find("\n" + model + " on ");
  const size_t at = section == std::string::npos ? section : output.find("\n  " + row, section);
  const size_t value = at == std::string::npos ? at : output.find("arena reserved", at);
  return value == std::string::npos ? -1 : std::stod(output.substr(value + 14));
}

TEST_F(CliTest, DemoSaysWhatThePolicyInForceDoesAndCountsLoadsPerModel) {
  Outcome ebb = Ebb("demo --size 64 --device cpu --models " + kModels);
  ASSERT_EQ(ebb.exit_code, 0) << ebb.output;
  EXPECT_NE(ebb.output.find("goes back at the end of each operation"), std::string::npos) << ebb.output;
  EXPECT_NE(ebb.output.find("after frame 3/3 (released)"), std::string::npos) << ebb.output;
  EXPECT_NE(ebb.output.find("arena column: cpu:shared"), std::string::npos) << ebb.output;
  EXPECT_GT(DemoReservedMiB(ebb.output, "convnet", "after frame 1/3"), 0) << ebb.output;
  EXPECT_EQ(DemoReservedMiB(ebb.output, "convnet", "after frame 3/3"), 0) << ebb.output;
  for (const char* model : {"convnet", "ppocr_det"}) {
    EXPECT_NE(ebb.output.find(std::string(model) + " stays loaded: 1 load(s) of this model"), std::string::npos)
        << ebb.output;
  }

  std::ofstream(Path("ort.json")) << R"({"release": "never", "cpu": {"arena": "per_session"}})";
  Outcome ort = Ebb("demo --size 64 --device cpu --models " + kModels + " --policy " + Path("ort.json"));
  ASSERT_EQ(ort.exit_code, 0) << ort.output;
  EXPECT_NE(ort.output.find("release: never"), std::string::npos) << ort.output;
  EXPECT_NE(ort.output.find("never given back"), std::string::npos) << ort.output;
  EXPECT_EQ(ort.output.find("goes back"), std::string::npos) << ort.output;
  EXPECT_EQ(ort.output.find("(released)"), std::string::npos) << ort.output;
  EXPECT_NE(ort.output.find("after frame 3/3 (ends; not released)"), std::string::npos) << ort.output;
  // The arena column is each session's own arena, which keeps what it grew to.
  EXPECT_NE(ort.output.find("arena column: cpu:convnet"), std::string::npos) << ort.output;
  const double grown = DemoReservedMiB(ort.output, "convnet", "after frame 1/3");
  EXPECT_GT(grown, 0) << ort.output;
  EXPECT_EQ(DemoReservedMiB(ort.output, "convnet", "after frame 3/3"), grown) << ort.output;
  EXPECT_GT(DemoReservedMiB(ort.output, "ppocr_det", "after frame 2/2"), 0) << ort.output;
  for (const char* model : {"convnet", "ppocr_det"}) {
    EXPECT_NE(ort.output.find(std::string(model) + " stays loaded: 1 load(s) of this model"), std::string::npos)
        << ort.output;
  }
}

}  // namespace
}  // namespace ebb
