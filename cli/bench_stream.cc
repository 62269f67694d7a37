// `ebb bench stream`: operations sent as many requests, against `ebb serve`
// under the release modes operation_end, idle and never (a server must not
// release after every request either).
//
// `ebb serve` children, one per mode (one Runtime per process: the shared
// arena is a process singleton) and one more of operation_end and of idle for
// the sequences, over the bundled models; the benchmark is their HTTP client,
// on loopback:
//   (a) throughput of tiny requests from 8 concurrent keep-alive connections
//       (wrk-like), the three modes in turn, the order rotated every round;
//       each round's figure is compared with never's of the same round, and
//       the median of those ratios is the measurement (the machine's other
//       load drifts by more than the goal's 3 % between rounds);
//   (b) after a burst on the idle server (of tiny requests, then of upscaler
//       tiles, whose runs grow the arena by tens of MiB): how long until its
//       shared arena and its RSS are back at the floor they had before it;
//   (c) one operation of 32 upscaler tiles sent as 32 requests, per case:
//       without sequence parameters under each mode, and as one sequence
//       (sequence_id, sequence_start, sequence_end) under operation_end and
//       idle; the cases in lock step, tile by tile. Its releases, its time
//       against never's, the memory after it.
// A/A: `never` is measured twice, on two servers (never, never_again), in
// every part: never_again's ratio to never is what the benchmark reports when
// nothing differs (aa_never_again_vs_never, ..._time), beside each ratio.
// Goals (each with its measured value, its limit and whether it is met):
// idle >= 0.97x never's throughput; memory back at the floor within the
// debounce + 50 ms; the sequence releases once, takes <= 1.03x never's time,
// and leaves the shared arena where operation_end's leaves it.
#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "bench.h"
#include "bench_goals.h"
#include "port.h"
#include "serve_child.h"

namespace ebb::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int kTiles = 32;
constexpr int64_t kTileSide = 64;  // inside one core of the upscaler's 128-pixel tile: one run per request
constexpr int kIdleMs = 50;         // the debounce measured (MemoryPolicy::idle_release_ms's default)

int64_t VmRss(int64_t pid) { return port::ResidentBytesOf(pid); }

// `ebb serve` under one release mode (`label`: the mode, or the mode with a suffix), with the policy's
// other fields from --policy, on a free loopback port.
Result<std::unique_ptr<ServeChild>> StartServer(const std::string& label, const std::string& mode,
                                                const std::string& repository, const fs::path& dir,
                                                const CommonOptions& common) {
  MemoryPolicy policy;
  if (!common.policy_file.empty()) {
    auto loaded = PolicyFrom(common);
    if (!loaded.ok()) return loaded.status();
    policy = *loaded;
  }
  policy.release = *ParseReleaseMode(mode);
  policy.idle_release_ms = kIdleMs;
  const fs::path policy_file = dir / ("policy_" + label + ".json");
  std::ofstream(policy_file) << MemoryPolicyToJson(policy);
  return ServeChild::Start(mode, {"--repository", repository, "--no-load", "--grpc-port", "0", "--policy",
                                  policy_file.string()});
}

std::string TinyBody() {
  std::vector<float> values(64);
  for (int i = 0; i < 64; ++i) values[i] = static_cast<float>(i) / 64;
  return json{{"inputs", {{{"name", "x"}, {"shape", {1, 64}}, {"datatype", "FP32"}, {"data", values}}}}}.dump();
}

// The upscaler's tile as a binary-tensor request (KServe's binary data extension: JSON header, then the bytes).
struct BinaryRequest {
  std::string body;
  size_t header_length = 0;
};
BinaryRequest TileRequest(const std::string& input, int tile, const std::optional<json>& sequence) {
  std::vector<NamedTensor> noise = NoiseImage(input, kTileSide, kTileSide, static_cast<uint32_t>(tile + 1));
  const Tensor& t = noise[0].tensor;
  json header = {{"inputs",
                  {{{"name", input},
                    {"shape", t.shape()},
                    {"datatype", "FP32"},
                    {"parameters", {{"binary_data_size", t.byte_size()}}}}}},
                 {"parameters", {{"binary_data_output", true}}}};
  if (sequence) header["parameters"].update(*sequence);
  BinaryRequest r;
  r.body = header.dump();
  r.header_length = r.body.size();
  r.body.append(reinterpret_cast<const char*>(t.data()), t.byte_size());
  return r;
}

// `clients` keep-alive connections to `s`, each sending `request` back to back for `seconds`:
// how many succeeded (the others are added to `failures`).
int64_t Burst(const ServeChild& s, int clients, double seconds, int* failures,
              const std::function<bool(httplib::Client&)>& request) {
  std::atomic<int64_t> done{0};
  std::atomic<int> failed{0};
  const double end = NowMs() + seconds * 1000;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      httplib::Client client("127.0.0.1", s.port());
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      while (NowMs() < end) {
        if (request(client)) {
          ++done;
        } else {
          ++failed;
        }
      }
      client.stop();
    });
  }
  for (auto& t : threads) t.join();
  *failures += failed;
  return done;
}

// (a) Tiny requests from `clients` keep-alive connections for `seconds`: how many succeeded.
int64_t TinyBurst(const ServeChild& s, int clients, double seconds, const std::string& body, int* failures) {
  return Burst(s, clients, seconds, failures, [&](httplib::Client& client) {
    auto res = client.Post("/v2/models/tiny/infer", body, "application/json");
    return res && res->status == 200;
  });
}

// (b) From the end of a burst: milliseconds until the arena and the RSS are at
// most the floor (+ slack for the RSS), sampled every 2 ms; -1 if not within 2 s.
json BackToFloor(const ServeChild& s, int64_t arena_floor, int64_t rss_floor, double burst_end_ms) {
  const int64_t rss_slack = 2 << 20;
  double arena_ms = -1, rss_ms = -1;
  int64_t arena = 0, rss = 0;
  while (NowMs() - burst_end_ms < 2000 && (arena_ms < 0 || rss_ms < 0)) {
    arena = s.Arena();
    rss = VmRss(s.pid());
    const double at = NowMs() - burst_end_ms;
    if (arena_ms < 0 && arena <= arena_floor) arena_ms = at;
    if (rss_ms < 0 && rss <= rss_floor + rss_slack) rss_ms = at;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return {{"arena_floor", arena_floor}, {"rss_floor", rss_floor},      {"arena_back_ms", arena_ms},
          {"rss_back_ms", rss_ms},      {"rss_slack", rss_slack},      {"arena_last", arena},
          {"rss_last", rss}};
}

struct OperationResult {
  double ms = 0;
  double releases = 0;
  int64_t arena_after = 0, rss_after = 0;
  std::vector<double> tile_ms;  // each request's time, in tile order
};

// One way of sending the tiled operation: to which server, as a sequence or not.
struct Case {
  std::string name, server;
  bool sequence;
};

// (c) The 32 tiles as 32 requests per case, the cases in lock step (tile i of
// every case, in an order rotated per tile, before tile i + 1), so that what
// else the machine does falls on every case alike; a case's time is the sum
// of its own requests' times. Releases and memory are read after the last
// tile, `settle_ms` later for cases whose release comes after a debounce.
std::map<std::string, OperationResult> TiledOperations(const std::vector<Case>& cases,
                                                       std::map<std::string, std::unique_ptr<ServeChild>>& servers,
                                                       const std::string& model, const std::string& input,
                                                       uint64_t* next_id, int* failures) {
  struct Running {
    const Case* c;
    ServeChild* s;
    std::unique_ptr<httplib::Client> client;
    std::vector<BinaryRequest> requests;
    double releases_before = 0, ms = 0;
    std::vector<double> tile_ms;
  };
  std::vector<Running> running;
  for (const Case& c : cases) {
    Running r{&c, servers[c.server].get(), std::make_unique<httplib::Client>("127.0.0.1", servers[c.server]->port())};
    r.client->set_keep_alive(true);
    r.client->set_tcp_nodelay(true);
    const uint64_t id = c.sequence ? (*next_id)++ : 0;
    for (int i = 0; i < kTiles; ++i) {
      std::optional<json> sequence;
      if (id) sequence = json{{"sequence_id", id}, {"sequence_start", i == 0}, {"sequence_end", i == kTiles - 1}};
      r.requests.push_back(TileRequest(input, i, sequence));
    }
    r.releases_before = r.s->Releases(model);
    running.push_back(std::move(r));
  }
  const std::string path = "/v2/models/" + model + "/infer";
  for (int i = 0; i < kTiles; ++i) {
    for (size_t k = 0; k < running.size(); ++k) {
      Running& r = running[(k + static_cast<size_t>(i)) % running.size()];
      const BinaryRequest& q = r.requests[static_cast<size_t>(i)];
      httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(q.header_length)}};
      const double t0 = NowMs();
      auto res = r.client->Post(path, headers, q.body, "application/octet-stream");
      r.ms += NowMs() - t0;
      r.tile_ms.push_back(NowMs() - t0);
      if (!res || res->status != 200) ++*failures;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(4 * kIdleMs));  // the idle server's release after the last tile
  std::map<std::string, OperationResult> out;
  for (Running& r : running) {
    r.client->stop();
    out[r.c->name] = {r.ms, r.s->Releases(model) - r.releases_before, r.s->Arena(), VmRss(r.s->pid()),
                      std::move(r.tile_ms)};
  }
  return out;
}

// (b) on a model whose runs grow the arena: `clients` connections send upscaler tiles back to back for `seconds`.
double TileBurst(const ServeChild& s, const std::string& model, const std::string& input, int clients, double seconds,
                 int* failures) {
  const BinaryRequest q = TileRequest(input, 0, std::nullopt);
  const httplib::Headers headers = {{"Inference-Header-Content-Length", std::to_string(q.header_length)}};
  const std::string path = "/v2/models/" + model + "/infer";
  return static_cast<double>(Burst(s, clients, seconds, failures, [&](httplib::Client& client) {
    auto res = client.Post(path, headers, q.body, "application/octet-stream");
    return res && res->status == 200;
  }));
}

}  // namespace

int BenchStream(const BenchOptions& options) {
  // The machine's other load drifts by more than the 3 % the goal allows: many short slices.
  const int cycles = options.iterations ? options.iterations : 24;
  const int clients = 8;
  const double seconds = 0.4;
  auto tiny = ResolveModel("tiny", options.common);
  if (!tiny.ok()) return Fail(tiny.status());
  auto upscaler = ResolveModel(options.model.empty() ? "waifu2x_scale2x" : options.model, options.common);
  if (!upscaler.ok()) return Fail(upscaler.status());
  const std::string repository = fs::absolute(fs::path(tiny->folder)).lexically_normal().parent_path().string();
  if (fs::absolute(fs::path(upscaler->folder)).lexically_normal().parent_path().string() != repository) {
    return Fail(InvalidArgument("the upscaler must be a model folder beside tiny's (under --models)"));
  }
  const fs::path dir = fs::temp_directory_path() / ("ebb_bench_stream_" + std::to_string(port::ProcessId()));
  std::error_code ec;
  fs::create_directories(dir, ec);

  // never_again is never once more, on a server of its own: its ratio to never is the A/A figure,
  // what the benchmark reports when nothing differs.
  const std::vector<std::string> modes = {"operation_end", "idle", "never", "never_again"};
  // One server per mode, and one more per mode for the sequences of (c), so
  // that every case's releases are its own.
  std::map<std::string, std::unique_ptr<ServeChild>> servers;
  for (const auto& [label, mode] : std::vector<std::pair<std::string, std::string>>{
           {"operation_end", "operation_end"},
           {"idle", "idle"},
           {"never", "never"},
           {"never_again", "never"},
           {"sequence_operation_end", "operation_end"},
           {"sequence_idle", "idle"}}) {
    auto child = StartServer(label, mode, repository, dir, options.common);
    if (!child.ok()) return Fail(child.status());
    servers[label] = std::move(child).value();
  }
  const std::string body = TinyBody();
  int failures = 0;
  // The upscaler's input name, from its metadata.
  std::string input = "x";
  {
    httplib::Client client("127.0.0.1", servers["never"]->port());
    auto res = client.Get("/v2/models/" + upscaler->name);
    if (res && res->status == 200) input = json::parse(res->body)["inputs"][0]["name"];
  }
  // Warm-up: each server loads both models and runs each once (the first run is measured alone).
  for (auto& [label, server] : servers) {
    (void)TinyBurst(*server, 1, 0.3, body, &failures);
    (void)TileBurst(*server, upscaler->name, input, 1, 0.1, &failures);
  }

  // (a) and (b): short slices, the modes in turn and the order rotated every
  // cycle, so that the machine's other load falls on every mode alike; a
  // mode's throughput is its requests over its slices' time, all cycles
  // together (per-cycle ratios are reported too).
  std::map<std::string, double> requests, slice_ms;
  std::map<std::string, std::vector<double>> cycle_rps;
  std::vector<json> floors;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    for (size_t k = 0; k < modes.size(); ++k) {
      const std::string& mode = modes[(k + static_cast<size_t>(cycle)) % modes.size()];
      ServeChild& s = *servers[mode];
      // The same pause before every slice: the idle server settles at its floor, and no mode gets a
      // quieter machine than another.
      std::this_thread::sleep_for(std::chrono::milliseconds(4 * kIdleMs));
      const int64_t arena_floor = s.Arena(), rss_floor = VmRss(s.pid());
      const double t0 = NowMs();
      const double n = static_cast<double>(TinyBurst(s, clients, seconds, body, &failures));
      const double t1 = NowMs();
      requests[mode] += n;
      slice_ms[mode] += t1 - t0;
      cycle_rps[mode].push_back(n / ((t1 - t0) / 1000));
      if (mode == "idle") floors.push_back(BackToFloor(s, arena_floor, rss_floor, t1));
    }
  }
  json throughput;
  for (const std::string& mode : modes) {
    throughput[mode] = {{"rps", requests[mode] / (slice_ms[mode] / 1000)}, {"rps_cycles", cycle_rps[mode]}};
  }
  const double idle_vs_never = (requests["idle"] / slice_ms["idle"]) / (requests["never"] / slice_ms["never"]);
  const double end_vs_never =
      (requests["operation_end"] / slice_ms["operation_end"]) / (requests["never"] / slice_ms["never"]);
  const double aa_vs_never =
      (requests["never_again"] / slice_ms["never_again"]) / (requests["never"] / slice_ms["never"]);
  std::vector<double> idle_ratio, end_ratio;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    idle_ratio.push_back(cycle_rps["idle"][cycle] / cycle_rps["never"][cycle]);
    end_ratio.push_back(cycle_rps["operation_end"][cycle] / cycle_rps["never"][cycle]);
  }
  double worst_back_ms = 0;
  for (const json& f : floors) {
    const double a = f["arena_back_ms"], r = f["rss_back_ms"];
    worst_back_ms = (a < 0 || r < 0) ? 1e9 : std::max({worst_back_ms, a, r});
  }

  // (b) again, on the upscaler: its runs grow the arena by tens of MiB.
  std::vector<json> tile_floors;
  for (int round = 0; round < 3; ++round) {
    ServeChild& s = *servers["idle"];
    std::this_thread::sleep_for(std::chrono::milliseconds(4 * kIdleMs));
    const int64_t arena_floor = s.Arena(), rss_floor = VmRss(s.pid());
    const double tiles = TileBurst(s, upscaler->name, input, 2, 1.0, &failures);
    json f = BackToFloor(s, arena_floor, rss_floor, NowMs());
    f["requests"] = tiles;
    tile_floors.push_back(f);
  }
  for (const json& f : tile_floors) {
    const double a = f["arena_back_ms"], r = f["rss_back_ms"];
    worst_back_ms = (a < 0 || r < 0) ? 1e9 : std::max({worst_back_ms, a, r});
  }

  // (c)
  const std::vector<Case> cases = {{"never", "never", false},
                                   {"never_again", "never_again", false},
                                   {"operation_end", "operation_end", false},
                                   {"idle", "idle", false},
                                   {"sequence_operation_end", "sequence_operation_end", true},
                                   {"sequence_idle", "sequence_idle", true}};
  std::map<std::string, std::vector<OperationResult>> ops;
  uint64_t next_id = 1;
  const int operation_rounds = 2;  // 32 upscaler runs (~0.6 s each here) per case and round
  for (int round = 0; round < operation_rounds; ++round) {
    for (auto& [name, r] : TiledOperations(cases, servers, upscaler->name, input, &next_id, &failures)) {
      ops[name].push_back(r);
    }
  }
  // A case's time is its requests' time over all rounds; the paired per-tile
  // ratios (tile i of a case over tile i of never, seconds apart) are reported
  // beside it, as a figure the machine's drift moves less.
  json operations;
  std::map<std::string, OperationResult> total;
  for (const Case& c : cases) {
    std::vector<double> ms, rel, arena, rss, paired;
    OperationResult& t = total[c.name];
    for (size_t round = 0; round < ops[c.name].size(); ++round) {
      const OperationResult& r = ops[c.name][round];
      ms.push_back(r.ms);
      rel.push_back(r.releases);
      arena.push_back(static_cast<double>(r.arena_after));
      rss.push_back(static_cast<double>(r.rss_after));
      t.ms += r.ms;
      t.releases = std::max(t.releases, r.releases);  // per operation: the most any round released
      t.arena_after = std::max(t.arena_after, r.arena_after);
      const OperationResult& never = ops["never"][round];
      for (size_t i = 0; i < r.tile_ms.size() && i < never.tile_ms.size(); ++i) paired.push_back(r.tile_ms[i] / never.tile_ms[i]);
    }
    operations[c.name] = {{"server", c.server},
                          {"sequence", c.sequence},
                          {"ms_total", t.ms},
                          {"ms_rounds", ms},
                          {"releases_rounds", rel},
                          {"arena_after_rounds", arena},
                          {"rss_after_rounds", rss},
                          {"tile_ratio_vs_never_median", Median(paired)}};
  }
  const double never_ms = total["never"].ms;
  const int64_t end_arena = total["operation_end"].arena_after;
  Goals goals;
  goals.AtLeast("idle_throughput_vs_never", idle_vs_never, 0.97, "x",
                "tiny requests: idle's requests per second over never's, all slices together");
  goals.AtMost("back_at_floor_after_burst_ms", worst_back_ms, kIdleMs + 50, "ms",
               "the idle server's shared arena and RSS (+2 MiB) at their floor after a burst, the slowest of all");
  for (const char* name : {"sequence_operation_end", "sequence_idle"}) {
    const OperationResult& r = total[name];
    bool once = true;  // every round's operation released exactly once
    for (double n : operations[name]["releases_rounds"]) once &= n == 1;
    goals.Holds(std::string(name) + "_releases_once", once, "32 requests of one sequence: one release");
    goals.AtMost(std::string(name) + "_time_vs_never", r.ms / never_ms, 1.03, "x",
                 "the 32 requests' time over never's, all rounds together");
    goals.AtMost(std::string(name) + "_arena_after_minus_operation_end", static_cast<double>(r.arena_after - end_arena),
                 1 << 20, "bytes", "the shared arena after the sequence, less after operation_end's 32 requests");
  }
  const json result = {{"model", tiny->name},
             {"upscaler", upscaler->name},
             {"clients", clients},
             {"seconds_per_slice", seconds},
             {"cycles", cycles},
             {"operation_rounds", operation_rounds},
             {"idle_release_ms", kIdleMs},
             {"tiles", kTiles},
             {"tile_side", kTileSide},
             {"failures", failures},
             {"throughput", throughput},
             {"idle_vs_never", idle_vs_never},
             {"idle_vs_never_cycles", idle_ratio},
             {"operation_end_vs_never", end_vs_never},
             {"operation_end_vs_never_cycles", end_ratio},
             {"aa_never_again_vs_never", aa_vs_never},
             {"aa_never_again_vs_never_time", total["never_again"].ms / never_ms},
             {"after_tiny_burst", floors},
             {"after_tile_burst", tile_floors},
             {"tiled_operation", operations}};
  servers.clear();
  fs::remove_all(dir, ec);
  return goals.Finish(result, failures ? 1 : 0);
}

}  // namespace ebb::cli
