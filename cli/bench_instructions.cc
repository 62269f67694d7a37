// `ebb bench instructions`: the instructions `ebb serve` spends on one tiny
// KServe v2 JSON inference request beyond the ONNX Runtime run, counted by
// callgrind, so a figure that neither the machine's load nor its wake-up
// speed changes.
//
// The server is this binary's `ebb serve` under
// `valgrind --tool=callgrind --instr-atstart=no` (instrumented only while it
// is measured, which also keeps ORT's start fast), serving the `tiny` model
// ([1,64] FP32) from --models, under its default release (`idle`) with the
// longest idle time (--policy's, else the defaults, with idle_release_ms at
// kMaxIdleReleaseMs): no release falls into the measured window, whose pauses
// (callgrind_control's) would otherwise end it with one. One client on one keep-alive connection sends
// kWarmup requests (the first loads the model; past the pool's measurement back-off, so that
// its steady state of one measured call in 256 is what the window holds: N = 256, the default,
// holds exactly one), then `callgrind_control -i on`, N requests, `callgrind_control -i off`,
// and the server stops (callgrind writes the profile as it exits). Every thread of the server
// is counted.
//
// The path a request takes: natively, a lone client's tiny request runs on the event loop
// (--quick-run-us, 200: its model's last request took less in the core, ~20 us for tiny).
// Under callgrind everything runs ~50x slower, so that test would fail and send every request
// to a worker, a path this traffic does not take natively: the goal's server gets
// --quick-run-us 1000000 (the decision a native server makes), and a third server counts the
// same requests with --quick-run-us 0 (the hop to a worker, which requests get while other
// clients send), reported beside it.
// The run is the inclusive cost of ebb's one call of ORT's Run
// (ebb::detail::InvokeOrtRun: Ort::RunOptions and OrtApi::Run), read from the
// profile's call records; beyond the run = all - the run.
//
// The functions beyond the run by self cost need the run's own self costs
// (malloc, for one, is called in and out of it): a second server counts only
// inside the run (`--collect-atstart=no --toggle-collect=` the run function),
// and its self costs are taken from the first's.
//
// Goal: instructions_per_tiny_json_request_at_most_40000 (beyond the run).
#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench.h"
#include "bench_goals.h"
#include "ebb/memory_policy.h"
#include "port.h"
#include "serve_child.h"

namespace ebb::cli {

namespace {

namespace fs = std::filesystem;

// ebb's one call of ORT's Run, as callgrind names it (parameters follow) and as a pattern of its options.
constexpr const char* kRunFunctionName = "ebb::detail::InvokeOrtRun(";
constexpr const char* kRunFunction = "ebb::detail::InvokeOrtRun*";
constexpr int kWarmup = 300;
constexpr int kDefaultRequests = 256;  // one of the pool's scheduled measurements in steady state
// --quick-run-us under callgrind: what the path's test decides natively for this traffic (see above).
constexpr const char* kQuickUnderValgrindUs = "1000000";
constexpr double kLimit = 40000;
constexpr const char* kUnit = "instructions beyond the run per request (callgrind, every server thread)";
constexpr size_t kTopFunctions = 10;

// Runs `program args...` (found on PATH) and returns what it printed on stdout; an error naming
// `what` when it cannot be run or exits with non-zero.
Result<std::string> RunTool(const std::vector<std::string>& args, const std::string& what) {
  auto child = port::Child::Spawn(args[0], args, {});
  if (!child.ok()) return child.status();
  std::string text;
  char buf[4096];
  for (size_t n; (n = child->ReadStdout(buf, sizeof buf)) != 0;) text.append(buf, n);
  const int code = child->Wait();
  if (code == 127) return FailedPrecondition(what + ": '" + args[0] + "' is not installed (not found on PATH)");
  if (code != 0) return Internal(what + ": '" + args[0] + "' exited with " + std::to_string(code) + ": " + text);
  return text;
}

// One callgrind profile (its `Ir` events): the total, each function's self cost (the cost lines
// under its `fn=`, not those after a `calls=` line, which are a call's inclusive cost), and the
// inclusive cost of the calls of the run function (from the functions other than itself).
struct Profile {
  int64_t total = 0;
  int64_t run = 0;
  std::map<std::string, int64_t> self;  // "function [object]" -> instructions
};

// The name a compressed `(id) name` or `(id)` stands for, remembering new ones in `names`.
std::string Expand(const std::string& text, std::map<std::string, std::string>* names) {
  if (text.empty() || text[0] != '(') return text;
  const size_t close = text.find(')');
  if (close == std::string::npos) return text;
  const std::string id = text.substr(0, close + 1);
  if (close + 1 < text.size()) (*names)[id] = text.substr(std::min(text.size(), close + 2));
  auto it = names->find(id);
  return it == names->end() ? text : it->second;
}

// Whether a function's name (as callgrind writes it, with its parameters) is the run function's.
bool IsRunFunction(const std::string& name) { return name.rfind(kRunFunctionName, 0) == 0; }

// Reads a callgrind output file (format version 1, positions `line`, the only event `Ir`).
Result<Profile> ReadProfile(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return Internal("callgrind wrote no profile at " + file.string());
  Profile p;
  std::map<std::string, std::string> fn_names, ob_names;
  std::string fn, ob, callee;
  bool after_calls = false, has_totals = false;
  int64_t summed = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const char c = line[0];
    if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '*') {  // a cost line: position, then Ir
      std::istringstream fields(line);
      std::string position;
      int64_t ir = 0;
      fields >> position >> ir;
      if (!after_calls) {
        p.self[fn + (ob.empty() ? "" : " [" + ob + "]")] += ir;
        summed += ir;
      } else if (IsRunFunction(callee) && !IsRunFunction(fn)) {
        p.run += ir;
      }
      after_calls = false;
    } else if (line.rfind("fn=", 0) == 0) {
      fn = Expand(line.substr(3), &fn_names);
    } else if (line.rfind("ob=", 0) == 0) {
      ob = fs::path(Expand(line.substr(3), &ob_names)).filename().string();
    } else if (line.rfind("cfn=", 0) == 0) {
      callee = Expand(line.substr(4), &fn_names);
    } else if (line.rfind("cob=", 0) == 0) {
      Expand(line.substr(4), &ob_names);
    } else if (line.rfind("calls=", 0) == 0) {
      after_calls = true;
    } else if (line.rfind("totals:", 0) == 0) {
      p.total = std::strtoll(line.c_str() + 7, nullptr, 10);
      has_totals = true;
    }
  }
  if (!has_totals) p.total = summed;
  return p;
}

// What one server under callgrind counted over `n` requests.
struct Counted {
  Profile profile;
  double seconds_to_start = 0, seconds_measured = 0;
};

// Starts `ebb serve` under callgrind with `collect` (its collection options), sends the warm-up
// and `n` measured requests on one keep-alive connection, stops it and reads its profile.
Result<Counted> Count(const std::string& label, const std::vector<std::string>& collect, const BenchOptions& options,
                      const fs::path& dir, const fs::path& policy, const std::string& body, int n,
                      const std::string& quick_run_us) {
  const fs::path out = dir / ("callgrind." + label + ".out");
  std::vector<std::string> valgrind = {"valgrind", "--tool=callgrind", "--instr-atstart=no",
                                       "--callgrind-out-file=" + out.string()};
  valgrind.insert(valgrind.end(), collect.begin(), collect.end());
  Counted counted;
  const double t0 = NowMs();
  {
    // EBB_NO_HUGEPAGES: ebb would otherwise run itself again at start (without valgrind).
    auto server = ServeChild::StartUnder(
        label, valgrind,
        {"--repository", options.common.models_dir, "--no-load", "--grpc-port", "0", "--io-threads", "1",
         "--quick-run-us", quick_run_us, "--policy", policy.string()},
        {{"EBB_NO_HUGEPAGES", "1"}});
    if (!server.ok()) return server.status();
    counted.seconds_to_start = (NowMs() - t0) / 1000;
    httplib::Client client("127.0.0.1", (*server)->port());
    client.set_keep_alive(true);
    client.set_tcp_nodelay(true);
    client.set_read_timeout(300, 0);  // the first request loads the model under valgrind
    auto send = [&](int count) -> Status {
      for (int i = 0; i < count; ++i) {
        auto res = client.Post("/v2/models/tiny/infer", body, "application/json");
        if (!res) return Internal("request to ebb serve under callgrind failed: " + httplib::to_string(res.error()));
        if (res->status != 200) {
          return Internal("ebb serve under callgrind answered " + std::to_string(res->status) + ": " + res->body);
        }
      }
      return Status::Ok();
    };
    EBB_RETURN_IF_ERROR(send(kWarmup));
    const std::string pid = std::to_string((*server)->pid());
    const double t1 = NowMs();
    EBB_RETURN_IF_ERROR(RunTool({"callgrind_control", "-i", "on", pid}, "switching callgrind's instrumentation on")
                            .status());
    EBB_RETURN_IF_ERROR(send(n));
    EBB_RETURN_IF_ERROR(RunTool({"callgrind_control", "-i", "off", pid}, "switching callgrind's instrumentation off")
                            .status());
    counted.seconds_measured = (NowMs() - t1) / 1000;
  }  // the server stops here; callgrind writes the profile as it exits
  auto profile = ReadProfile(out);
  if (!profile.ok()) return profile.status();
  counted.profile = std::move(profile).value();
  return counted;
}

// The tiny model's request: [1,64] FP32 as KServe v2 JSON, members in the order Triton's clients write them.
std::string TinyJsonBody() {
  std::vector<float> values(64);
  for (int i = 0; i < 64; ++i) values[i] = static_cast<float>(i) / 64;
  return nlohmann::ordered_json{
      {"inputs", {{{"name", "x"}, {"shape", {1, 64}}, {"datatype", "FP32"}, {"data", values}}}}}
      .dump();
}

}  // namespace

int BenchInstructions(const BenchOptions& options) {
  const int n = options.iterations > 0 ? options.iterations : kDefaultRequests;
  const std::string goal = "instructions_per_tiny_json_request_at_most_40000";
  Goals goals;
  // Nothing measured: the goal says why, and the command fails.
  auto not_measured = [&](const Status& failed) {
    goals.AtMost(goal, std::nullopt, kLimit, kUnit, failed.message());
    Fail(failed);
    return goals.Finish({{"benchmark", "instructions"}}, 1);
  };
  // valgrind first: without it nothing can be measured.
  for (const char* tool : {"valgrind", "callgrind_control"}) {
    auto version = RunTool({tool, "--version"}, "bench instructions counts with callgrind");
    if (!version.ok()) return not_measured(version.status());
  }
  if (!fs::exists(fs::path(options.common.models_dir) / "tiny" / "model.onnx")) {
    return Fail(NotFound("no tiny model under --models " + options.common.models_dir));
  }
  std::error_code ec;
  // EBB_BENCH_PROFILE_DIR keeps the three profiles there (for callgrind_annotate); else a temporary folder.
  const std::string keep = port::GetEnv("EBB_BENCH_PROFILE_DIR");
  const fs::path dir = !keep.empty() ? fs::path(keep)
                                     : fs::temp_directory_path() /
                                           ("ebb_bench_instructions_" + std::to_string(port::ProcessId()));
  fs::create_directories(dir, ec);
  if (ec) return Fail(Internal("cannot create " + dir.string() + ": " + ec.message()));
  const std::string body = TinyJsonBody();
  Result<MemoryPolicy> policy = PolicyFrom(options.common);
  if (!policy.ok()) return Fail(policy.status());
  policy->release = ReleaseMode::kIdle;
  policy->idle_release_ms = kMaxIdleReleaseMs;
  const fs::path policy_file = dir / "policy.json";
  std::ofstream(policy_file) << MemoryPolicyToJson(*policy);
  auto all = Count("all", {}, options, dir, policy_file, body, n, kQuickUnderValgrindUs);
  Result<Counted> in_run =
      all.ok() ? Count("in_run", {"--collect-atstart=no", std::string("--toggle-collect=") + kRunFunction}, options,
                       dir, policy_file, body, n, kQuickUnderValgrindUs)
               : Result<Counted>(all.status());
  Result<Counted> on_worker = in_run.ok() ? Count("on_worker", {}, options, dir, policy_file, body, n, "0")
                                          : Result<Counted>(in_run.status());
  if (keep.empty()) fs::remove_all(dir, ec);
  if (!on_worker.ok()) return not_measured(on_worker.status());
  const Profile& profile = all->profile;
  if (profile.run <= 0 || on_worker->profile.run <= 0) {
    return not_measured(Internal(std::string("the profile has no call of ") + kRunFunction));
  }
  const double per_all = static_cast<double>(profile.total) / n;
  const double per_run = static_cast<double>(profile.run) / n;
  const double per_beyond = per_all - per_run;
  const double per_beyond_on_worker = static_cast<double>(on_worker->profile.total - on_worker->profile.run) / n;
  std::vector<std::pair<int64_t, std::string>> top;
  for (const auto& [name, ir] : profile.self) {
    auto inside = in_run->profile.self.find(name);
    top.push_back({ir - (inside == in_run->profile.self.end() ? 0 : inside->second), name});
  }
  std::sort(top.rbegin(), top.rend());
  nlohmann::json top_json = nlohmann::json::array();
  for (size_t i = 0; i < top.size() && i < kTopFunctions; ++i) {
    top_json.push_back({{"function", top[i].second},
                        {"instructions_per_request", std::round(static_cast<double>(top[i].first) / n)}});
  }
  nlohmann::json figures = {
      {"benchmark", "instructions"},
      {"model", "tiny"},
      {"request", "KServe v2 JSON, one [1,64] FP32 input, one keep-alive connection"},
      {"requests", n},
      {"warmup_requests", kWarmup},
      {"path", "the event loop (--quick-run-us " + std::string(kQuickUnderValgrindUs) +
                   " under callgrind: a lone client's tiny request natively), and a worker (--quick-run-us 0)"},
      {"release", "idle, idle_release_ms " + std::to_string(kMaxIdleReleaseMs)},
      {"run_function", kRunFunction},
      {"instructions_per_request", std::round(per_all)},
      {"instructions_per_request_in_run", std::round(per_run)},
      {"instructions_per_request_beyond_run", std::round(per_beyond)},
      // The same requests handed to a worker (what they get while other clients send).
      {"instructions_per_request_beyond_run_on_a_worker", std::round(per_beyond_on_worker)},
      // The second server's count inside the run (the same requests): a check of the first's.
      {"instructions_per_request_in_run_counted_apart", std::round(static_cast<double>(in_run->profile.total) / n)},
      {"top_functions_beyond_run_by_self_cost", top_json},
      {"seconds_to_start_under_valgrind", std::round(all->seconds_to_start * 10) / 10},
      {"seconds_measured",
       std::round((all->seconds_measured + in_run->seconds_measured + on_worker->seconds_measured) * 10) / 10},
  };
  goals.AtMost(goal, per_beyond, kLimit, kUnit);
  return goals.Finish(figures);
}

}  // namespace ebb::cli
