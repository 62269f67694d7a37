// `ebb bench ocr`'s switching part: the OCR pipeline and a 100 MB model
// (the generated conv_100mb) alternate over HTTP, 4 clients at once, on
// `ebb serve` under a memory budget that holds only one of them, as an OCR
// service switching to another job and back. Every request must succeed: no
// failure and no false out-of-memory; evictions make the room.
//
// The budget is measured, not guessed: a first server without one runs each
// model once, and its statistics give what each needs (charge + transient
// peak); the budget is the larger need plus 15%, which must be less than the
// two together (else the part says it cannot be set up).
#include "bench_ocr_switch.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

#include "ebb/model_config.h"
#include "serve_child.h"

namespace ebb::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int kClients = 4;
constexpr int kRequestsEach = 6;

// A repository of links: the pipeline folder as "ocr", its parts where its config.json names them, and
// conv_100mb.
Status MakeRepository(const fs::path& repo, const std::string& pipeline, const std::string& conv_model) {
  auto config = LoadModelConfig(pipeline, "");
  if (!config.ok()) return config.status();
  std::error_code ec;
  fs::create_directories(repo / "conv_100mb", ec);
  fs::create_symlink(fs::absolute(conv_model), repo / "conv_100mb" / "model.onnx", ec);
  if (ec) return Internal("linking " + conv_model + ": " + ec.message());
  fs::create_directory_symlink(fs::absolute(pipeline), repo / "ocr", ec);
  if (ec) return Internal("linking " + pipeline + ": " + ec.message());
  for (const std::string& part : {config->ocr.detector, config->ocr.classifier, config->ocr.recognizer}) {
    const fs::path at = (repo / "ocr" / part).lexically_normal();
    const fs::path rel = at.lexically_relative(repo);
    if (rel.empty() || rel.begin()->string() == ".." || fs::exists(at)) continue;
    fs::create_directory_symlink(fs::absolute((fs::path(pipeline) / part).lexically_normal()), at, ec);
    if (ec) return Internal("linking the OCR part " + part + ": " + ec.message());
  }
  return Status::Ok();
}

struct Request {
  std::string path, body;
  size_t header_length = 0;
};

// One encoded image as the pipeline's BYTES input, in the binary data extension (a 4-byte length, the bytes).
Request OcrRequest(const std::string& png) {
  std::string element(4, '\0');
  const uint32_t n = static_cast<uint32_t>(png.size());
  std::memcpy(element.data(), &n, 4);  // little-endian, as the extension's BYTES are
  element += png;
  const std::string header = json{{"inputs", {{{"name", "image"}, {"shape", {1}}, {"datatype", "BYTES"},
                                               {"parameters", {{"binary_data_size", element.size()}}}}}}}
                                 .dump();
  return {"/v2/models/ocr/infer", header + element, header.size()};
}

Request ConvRequest() {
  const std::string bytes(size_t{1} * 3 * 64 * 64 * sizeof(float), '\0');
  const std::string header = json{{"inputs", {{{"name", "x"}, {"shape", {1, 3, 64, 64}}, {"datatype", "FP32"},
                                               {"parameters", {{"binary_data_size", bytes.size()}}}}}},
                                  {"parameters", {{"binary_data_output", true}}}}
                                 .dump();
  return {"/v2/models/conv_100mb/infer", header + bytes, header.size()};
}

// The lines of an OCR answer's JSON "text" output, one per line.
std::string TextOf(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  std::string text;
  if (j.is_discarded() || !j.contains("outputs")) return text;
  for (const json& o : j["outputs"]) {
    if (o.value("name", "") != "text" || !o.contains("data")) continue;
    for (const json& line : o["data"]) text += line.get<std::string>() + "\n";
  }
  return text;
}

// What a model needed on a server running it alone: its charge and its largest operation's transient peak.
Result<int64_t> NeedOf(const ServeChild& server, const std::string& model) {
  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Get(("/v2/models/" + model + "/stats").c_str());
  if (!res || res->status != 200) return Internal("no statistics for " + model);
  json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.contains("model_stats") || j["model_stats"].empty()) {
    return Internal("statistics for " + model + " are not JSON");
  }
  const json& ebb = j["model_stats"][0]["ebb"];
  return ebb.value("charge_bytes", int64_t{0}) + ebb.value("transient_peak_bytes", int64_t{0});
}

// A client of the server, as patient as a model's load and a page's OCR need.
std::unique_ptr<httplib::Client> ClientOf(const ServeChild& server) {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", server.port());
  client->set_read_timeout(std::chrono::seconds(300));
  return client;
}

// Sends `r`; its answer, or why there is none (status and the start of the body, or the transport's error).
httplib::Result Post(httplib::Client& client, const Request& r, std::string* why) {
  const httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(r.header_length)}};
  httplib::Result res = client.Post(r.path.c_str(), headers, r.body, "application/octet-stream");
  if (!res || res->status != 200) {
    *why = r.path + ": " + (res ? std::to_string(res->status) + " " + res->body.substr(0, 300)
                                : std::string("no answer: ") + httplib::to_string(res.error()));
  }
  return res;
}

Status Send(const ServeChild& server, const Request& r) {
  std::string why;
  httplib::Result res = Post(*ClientOf(server), r, &why);
  return why.empty() ? Status::Ok() : Internal(why);
}

}  // namespace

Result<json> MeasureOcrSwitching(const OcrBenchOptions& o, const std::string& pipeline, const std::string& page_png,
                                 const std::string& page_text, const fs::path& dir) {
  const std::string conv = GeneratedModelsDir(o.generated_dir) + "/conv_100mb/model.onnx";
  if (!fs::exists(conv)) {
    return NotFound("no generated model '" + conv + "' (built by the `generated_models` target; or --generated DIR)");
  }
  std::ifstream in(page_png, std::ios::binary);
  const std::string png((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (png.empty()) return NotFound("cannot read the page " + page_png);
  const fs::path repo = dir / "switch_repository";
  EBB_RETURN_IF_ERROR(MakeRepository(repo, pipeline, conv));
  std::vector<std::string> args = {"--repository", repo.string(), "--no-load", "--grpc-port", "-1"};
  if (!o.common.policy_file.empty()) args.insert(args.end(), {"--policy", o.common.policy_file});
  const Request ocr = OcrRequest(png), convnet = ConvRequest();

  // Each model's need, on a server without a budget.
  int64_t need_ocr = 0, need_conv = 0;
  {
    auto probe = ServeChild::Start("switching, unbudgeted", args);
    if (!probe.ok()) return probe.status();
    EBB_RETURN_IF_ERROR(Send(**probe, ocr));
    EBB_RETURN_IF_ERROR(Send(**probe, convnet));
    Result<int64_t> a = NeedOf(**probe, "ocr"), b = NeedOf(**probe, "conv_100mb");
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    need_ocr = *a;
    need_conv = *b;
  }
  const int64_t budget = std::max(need_ocr, need_conv) * 115 / 100;
  if (budget >= need_ocr + need_conv) {
    return FailedPrecondition("no budget holds one of the two but not both (needs: OCR " + std::to_string(need_ocr) +
                              " bytes, conv_100mb " + std::to_string(need_conv) + ")");
  }
  args.insert(args.end(), {"--memory-budget", std::to_string(budget), "--wait-for-capacity-ms", "120000"});
  auto server = ServeChild::Start("switching", args);
  if (!server.ok()) return server.status();

  std::atomic<int> sent{0}, failed{0}, out_of_memory{0}, text_differs{0};
  std::mutex mu;
  std::string first_error;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int k = 0; k < kClients; ++k) {
    clients.emplace_back([&, k] {
      const std::unique_ptr<httplib::Client> client = ClientOf(**server);
      for (int i = 0; i < kRequestsEach; ++i) {
        const bool is_ocr = (i + k) % 2 == 0;
        std::string why;
        httplib::Result res = Post(*client, is_ocr ? ocr : convnet, &why);
        ++sent;
        if (why.empty()) {
          if (is_ocr && TextOf(res->body) != page_text) ++text_differs;
          continue;
        }
        ++failed;
        if (why.find("out of memory") != std::string::npos) ++out_of_memory;
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.empty()) first_error = why;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  json out = {{"clients", kClients},
              {"requests", sent.load()},
              {"failures", failed.load()},
              {"out_of_memory_failures", out_of_memory.load()},
              {"ocr_text_differs_from_the_burst", text_differs.load()},
              {"seconds", seconds},
              {"budget_mib", static_cast<double>(budget) / (1 << 20)},
              {"need_mib", {{"ocr", static_cast<double>(need_ocr) / (1 << 20)},
                            {"conv_100mb", static_cast<double>(need_conv) / (1 << 20)}}},
              {"evictions", (*server)->MetricSum("ebb_model_evictions_total")},
              {"loads", (*server)->MetricSum("ebb_model_loads_total")}};
  if (!first_error.empty()) out["first_error"] = first_error;
  return out;
}

}  // namespace ebb::cli
