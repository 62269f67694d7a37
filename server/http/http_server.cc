#include "http_server.h"

#include <zlib.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/container/small_vector.hpp>
#include <chrono>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "http_framing.h"
#include "port.h"

namespace ebb::server {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

constexpr size_t kIdleReadBytes = 4u << 10;     // buffer of a connection waiting for a request
// The largest body of a quick request (HttpOptions::quick_run_us): its decoding, which the
// request's last time covers only for bodies like its own, stays within a few microseconds.
constexpr size_t kQuickBodyBytes = 64u << 10;
// A request is lone (Transport::Lone) when no other connection dispatched one within this.
constexpr auto kLoneWindow = std::chrono::milliseconds(1);
constexpr size_t kHeaderReadBytes = 16u << 10;
constexpr size_t kBodyReadBytes = 64u << 10;
// A read straight into a body's buffer (RequestFramer::body_tail) takes at most this much, so that
// the budget of body bytes in flight is asked before every MiB lands, as before every 64 KiB read.
constexpr size_t kInPlaceReadBytes = 1u << 20;
constexpr auto kLingerRead = std::chrono::seconds(2);   // after a closing reply, drain the client's
constexpr auto kLingerTotal = std::chrono::seconds(5);  // bytes so that it can read the reply (no RST)
constexpr size_t kMaxRefusing = 64;   // refused connections being answered at once; beyond: closed
constexpr size_t kExtraFiles = 512;   // descriptors beside the connections (models, listener, ...)
constexpr size_t kCompressMinBytes = 1024;
// Threads for control requests (metadata, metrics, index, statistics): each is quick, so a few keep
// them answered while every worker is taken by inferences.
constexpr size_t kControlThreads = 4;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

std::string Seconds(int s) { return std::to_string(s) + " s"; }

// Health probes are answered on the I/O thread: they stay fast when every worker is busy.
bool AnsweredInline(const RequestFramer& request) {
  if (request.method() != "GET" && request.method() != "HEAD") return false;
  const std::string_view path = request.target().substr(0, request.target().find('?'));
  return path == "/v2/health/live" || path == "/v2/health/ready";
}

// The content coding a client accepts for a reply: "gzip", "deflate" or "" (identity).
std::string_view AcceptedCoding(std::optional<std::string_view> accept) {
  if (!accept) return {};
  bool gzip = false, deflate = false;
  std::string_view list = *accept;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view member = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    const size_t semicolon = member.find(';');
    std::string_view params = semicolon == std::string_view::npos ? std::string_view{} : member.substr(semicolon);
    std::string_view name = member.substr(0, semicolon);
    while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    const size_t q = params.find("q=");
    if (q != std::string_view::npos && params.substr(q + 2).find_first_not_of("0.") >= params.size() - q - 2) continue;
    if (name == "gzip" || name == "x-gzip" || name == "*") gzip = true;
    if (name == "deflate") deflate = true;
  }
  return gzip ? "gzip" : deflate ? "deflate" : "";
}

// Compresses `body` with the gzip or zlib ("deflate") format; false when zlib fails.
bool Compress(std::string& body, bool gzip) {
  if (body.size() > UINT32_MAX / 2) return false;
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, gzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  std::string out(deflateBound(&z, static_cast<uLong>(body.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(body.data());
  z.avail_in = static_cast<uInt>(body.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return false;
  out.resize(z.total_out);
  body = std::move(out);
  return true;
}

// The status line and header fields of a reply, written into *out (cleared first; its capacity,
// kept from the connection's reply before, serves as a rule). The transport formats them itself (a
// status line and a few fields), so that a reply goes out in one gathered write with its body.
void FormatHead(const HttpReply& reply, size_t content_length, std::string_view connection, std::string* out) {
  const auto reason = boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(reply.status));
  const std::string_view content_type(reply.content_type);
  // The fixed parts, a status code and a length take under 128 bytes.
  size_t size = 128 + reason.size() + content_type.size() + connection.size();
  for (const auto& [name, value] : reply.headers) size += name.size() + value.size() + 4;
  std::string& head = *out;
  head.resize(size);  // written below through a pointer, then cut to what it took (at most one allocation)
  char* p = head.data();
  const auto put = [&p](std::string_view piece) {
    std::memcpy(p, piece.data(), piece.size());
    p += piece.size();
  };
  const auto put_number = [&p](auto n) { p = std::to_chars(p, p + 24, n).ptr; };
  put("HTTP/1.1 ");
  put_number(reply.status);
  put(" ");
  put({reason.data(), reason.size()});
  put("\r\nContent-Type: ");
  put(content_type);
  put("\r\nContent-Length: ");
  put_number(content_length);
  for (const auto& [name, value] : reply.headers) {
    put("\r\n");
    put(name);
    put(": ");
    put(value);
  }
  if (!connection.empty()) {
    put("\r\nConnection: ");
    put(connection);
  }
  put("\r\n\r\n");
  head.resize(static_cast<size_t>(p - head.data()));
}

class Connection;
struct Transport;

// An inference taken from Transport::TakeInference, given back when this goes (moved with the
// request to the thread that answers it); null: none was taken.
class InferenceTaken {
 public:
  explicit InferenceTaken(Transport* t) : t_(t) {}
  InferenceTaken(InferenceTaken&& other) noexcept : t_(std::exchange(other.t_, nullptr)) {}
  InferenceTaken& operator=(InferenceTaken&&) = delete;
  ~InferenceTaken() { reset(); }
  void reset();

 private:
  Transport* t_;
};

// What every connection shares: options, the event loop, the workers, counters and budgets.
struct Transport {
  Transport(RestApi& a, HttpOptions o, ByteBudget& budget)
      : api(a),
        options(std::move(o)),
        limits{options.max_header_bytes, options.max_uri_bytes, options.max_body_bytes},
        body_budget(budget),
        io(static_cast<int>(std::max<size_t>(1, options.io_threads))),
        acceptor(asio::make_strand(io)),
        accept_retry(acceptor.get_executor()),
        workers(std::max<size_t>(1, options.threads)),
        control(kControlThreads) {}

  Status Bind();
  void Serve();
  void Stop();
  void Accept();
  void OnAccept(const error_code& ec, tcp::socket socket);

  // An event-loop turn (HttpOptions::io_threads): true when one of the io_threads - 1 was free and
  // is now taken; GiveBackInlineTurn returns it.
  bool TakeInlineTurn() {
    size_t free = inline_turns.load(std::memory_order_relaxed);
    while (free > 0 && !inline_turns.compare_exchange_weak(free, free - 1, std::memory_order_acquire)) {
    }
    return free > 0;
  }
  void GiveBackInlineTurn() { inline_turns.fetch_add(1, std::memory_order_release); }

  // Whether the connection `me`, dispatching a request now, is the only one that did within the
  // last kLoneWindow (health probes not counted): the quick path is for a lone client. Several
  // clients at once go to the workers, which run their requests side by side, where the event
  // loop would run them one after the other. Called for every dispatch it is to track.
  bool Lone(const void* me) {
    const int64_t now = Clock::now().time_since_epoch().count();
    const void* previous = last_dispatcher.exchange(me, std::memory_order_relaxed);
    const int64_t before = last_dispatch.exchange(now, std::memory_order_relaxed);
    return previous == me || previous == nullptr ||
           now - before > std::chrono::duration_cast<Clock::duration>(kLoneWindow).count();
  }

  // An inference handed off (to a worker or an event-loop turn) until it is answered: false when
  // InferencesAtOnce() are already, so that what waits is bounded as the core's queue is (the
  // worker pool's own queue has no bound). GiveBackInference ends it.
  bool TakeInference() {
    const size_t limit = api.InferencesAtOnce();
    size_t now = inferences.load(std::memory_order_relaxed);
    do {
      if (now >= limit) return false;
    } while (!inferences.compare_exchange_weak(now, now + 1, std::memory_order_relaxed));
    return true;
  }
  void GiveBackInference() { inferences.fetch_sub(1, std::memory_order_relaxed); }

  // The budget of body bytes in flight (the core's, shared with gRPC).
  bool Reserve(size_t n) { return body_budget.TryCharge(n); }
  void Unreserve(size_t n) { body_budget.Release(n); }

  RestApi& api;
  const HttpOptions options;
  const FramingLimits limits;
  ByteBudget& body_budget;
  std::atomic<size_t> connections{0};
  std::atomic<size_t> refusing{0};
  std::atomic<bool> stopping{false};
  std::atomic<size_t> inline_turns{options.io_threads > 1 ? options.io_threads - 1 : 0};
  std::atomic<const void*> last_dispatcher{nullptr};  // Lone(): the connection of the last dispatch
  std::atomic<int64_t> last_dispatch{0};              // and when (Clock ticks)
  std::atomic<size_t> inferences{0};                  // handed off and not answered (TakeInference)
  int port = 0;
  std::mutex mu;
  std::unordered_set<Connection*> live;  // guarded by mu; for Stop
  // Declared last, destroyed first: handlers they still hold release connections, which use the above.
  asio::io_context io;
  tcp::acceptor acceptor;
  asio::steady_timer accept_retry;
  asio::thread_pool workers;  // inferences, loads and unloads
  asio::thread_pool control;  // control requests (RestApi::Kind::kControl): never behind an inference
};

void InferenceTaken::reset() {
  if (t_) std::exchange(t_, nullptr)->GiveBackInference();
}

// One connection: reads and frames requests one at a time, runs each (inline or on a worker),
// writes the reply, and keeps the deadlines. Everything but the request's handling runs on the
// connection's strand (with one event-loop thread, the default, that thread's loop is the strand).
//
//   kIdle -(first byte)-> kHeader -(header)-> kBody -(body)-> kHandling -(reply)-> kWriting -> kIdle
//   a framing error or a deadline: an error reply (kWriting), then kClosing (lingering) -> kClosed
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class Phase { kIdle, kHeader, kBody, kContinue, kHandling, kWriting, kClosing, kClosed };

  Connection(Transport& transport, tcp::socket socket, bool refused)
      : t_(transport), socket_(std::move(socket)), timer_(socket_.get_executor()), refused_(refused) {}

  ~Connection() {
    DropRequest();
    (refused_ ? t_.refusing : t_.connections).fetch_sub(1);
    std::lock_guard lock(t_.mu);
    t_.live.erase(this);
  }

  tcp::socket::executor_type executor() { return socket_.get_executor(); }

  void Start() {
    {
      std::lock_guard lock(t_.mu);
      t_.live.insert(this);
    }
    if (t_.stopping) return CloseNow();
    if (refused_) {
      return Fail(503, "server busy: " + std::to_string(t_.options.max_connections) +
                           " connections are open, the limit (--max-connections); retry later");
    }
    Read();
  }

  // The server stops: a connection without a request in progress closes now; the others finish.
  void OnStop() {
    if (phase_ == Phase::kIdle || phase_ == Phase::kHeader) CloseNow();
  }

 private:
  void Read() {
    const auto now = Clock::now();
    size_t want = kIdleReadBytes;
    switch (phase_) {
      case Phase::kIdle: SetDeadline(now + std::chrono::seconds(t_.options.idle_timeout_s)); break;
      case Phase::kHeader:
        SetDeadline(std::min(now + std::chrono::seconds(t_.options.read_timeout_s), header_deadline_));
        want = kHeaderReadBytes;
        break;
      case Phase::kBody:
        SetDeadline(std::min(now + std::chrono::seconds(t_.options.read_timeout_s), body_deadline_));
        if (const std::span<char> tail = framer_->body_tail(); !tail.empty() && buffer_.size() == 0) {
          // A body of known length: read where the framer keeps it, not into buffer_ and then copied.
          socket_.async_read_some(asio::buffer(tail.data(), std::min(tail.size(), kInPlaceReadBytes)),
                                  [self = shared_from_this()](const error_code& ec, size_t n) { self->OnBodyRead(ec, n); });
          return;
        }
        want = kBodyReadBytes;
        // No more room than the rest of a body of known length needs: a small body then fits in
        // the buffer the header came in, instead of growing it to 64 KiB and shrinking it back
        // after the reply (a malloc, a free and a consolidation of glibc's heap per request).
        if (const std::optional<uint64_t> left = framer_->body_bytes_left()) {
          want = static_cast<size_t>(std::clamp<uint64_t>(*left, 1, kBodyReadBytes));
        }
        break;
      default: return;
    }
    want = std::max(want, buffer_.capacity() - buffer_.size());
    socket_.async_read_some(buffer_.prepare(want),
                            [self = shared_from_this()](const error_code& ec, size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(const error_code& ec, size_t n) {
    if (phase_ != Phase::kIdle && phase_ != Phase::kHeader && phase_ != Phase::kBody) return;  // cancelled
    if (ec) {
      if (ec == asio::error::eof && framer_ && framer_->started()) {  // half-closed mid-request: say why
        framer_->EndOfInput();
        return Fail(framer_->error().status, framer_->error().message);
      }
      return CloseNow();
    }
    buffer_.commit(n);
    Frame();
  }

  // `n` bytes read into the framer's body_tail().
  void OnBodyRead(const error_code& ec, size_t n) {
    if (phase_ != Phase::kBody) return;  // cancelled
    if (ec) return OnRead(ec, 0);
    const std::span<char> tail = framer_->body_tail();
    framer_->Feed({tail.data(), n});  // in place: nothing copied
    if (OnFramed()) Read();
  }

  // Feeds the buffered bytes to the framer and acts on what it says.
  void Frame() {
    for (;;) {
      if (!framer_) framer_.emplace(t_.limits, [this](size_t n) { return t_.Reserve(n); }, &framer_room_);
      const auto data = buffer_.data();
      const size_t used = framer_->Feed({static_cast<const char*>(data.data()), data.size()});
      buffer_.consume(used);
      if (!OnFramed()) return;
      if (used == 0 || buffer_.size() == 0) break;
    }
    Read();
  }

  // Acts on the framer's state after a Feed; false when the connection moved on (a reply, an error
  // reply, 100 Continue) and must not read.
  bool OnFramed() {
    switch (framer_->state()) {
      case RequestFramer::State::kFailed: Fail(framer_->error().status, framer_->error().message); return false;
      case RequestFramer::State::kComplete: Dispatch(); return false;
      case RequestFramer::State::kHeader:
        if (phase_ == Phase::kIdle && framer_->started()) {
          phase_ = Phase::kHeader;
          header_deadline_ = Clock::now() + std::chrono::seconds(t_.options.header_timeout_s);
        }
        break;
      case RequestFramer::State::kBody:
        if (phase_ != Phase::kBody) {
          phase_ = Phase::kBody;
          body_deadline_ = Clock::now() + std::chrono::seconds(t_.options.body_timeout_s);
          if (framer_->expects_continue() && buffer_.size() == 0) {
            SendContinue();
            return false;
          }
        }
        break;
    }
    return true;
  }

  void SendContinue() {
    phase_ = Phase::kContinue;
    SetDeadline(Clock::now() + std::chrono::seconds(t_.options.write_timeout_s));
    asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                      [self = shared_from_this()](const error_code& ec, size_t) {
                        if (self->phase_ != Phase::kContinue) return;
                        if (ec) return self->CloseNow();
                        self->phase_ = Phase::kBody;
                        self->Read();
                      });
  }

  // A complete request: answered here (health) or on a worker.
  void Dispatch() {
    phase_ = Phase::kHandling;
    SetDeadline(Clock::time_point::max());
    keep_alive_ = framer_->keep_alive() && !t_.stopping;
    head_request_ = framer_->method() == "HEAD";
    http10_ = framer_->version() == 10;
    const HttpRequest head{framer_->method(), framer_->target(), {}, {}};
    route_ = RestApi::Find(head);  // once: Handle and IsQuick read it too
    if (AnsweredInline(*framer_)) {
      watch_gone_ = false;  // a health probe reads no `cancelled`; nothing of the request before stays
      return Send(Prepare(Handle()));
    }
    const RestApi::Kind kind = RestApi::KindOf(head, route_);
    if (kind == RestApi::Kind::kInference && !t_.TakeInference()) return Send(Prepare(t_.api.Busy()));
    // Given back once the reply is made, on whichever thread makes it.
    InferenceTaken handed_off(kind == RestApi::Kind::kInference ? &t_ : nullptr);
    const bool quick = kind == RestApi::Kind::kInference && IsQuick();
    if (quick || t_.TakeInlineTurn()) {
      // A quick request, or an event-loop turn (another event-loop thread serves the other
      // connections meanwhile; at most io_threads - 1 turns are out): the request runs here,
      // without the hop to a worker. The strand is busy, so the client's going away is learnt
      // by asking the socket when a wait polls `cancelled`, not by WatchForClose.
      watch_gone_ = false;
      inline_socket_ = static_cast<intptr_t>(socket_.native_handle());
      Outgoing reply = Prepare(Handle());
      handed_off.reset();
      inline_socket_ = -1;
      if (!quick) t_.GiveBackInlineTurn();
      return Send(std::move(reply));
    }
    client_gone_.store(false);
    watch_gone_ = true;
    const uint64_t handling = ++handling_;
    asio::thread_pool& pool = kind == RestApi::Kind::kControl ? t_.control : t_.workers;
    asio::post(pool, [self = shared_from_this(), work = asio::make_work_guard(executor()),
                      handed_off = std::move(handed_off)]() mutable {
      Outgoing reply = self->Prepare(self->Handle());
      handed_off.reset();
      // The reply leaves from here when the socket takes it at once (the usual case), one thread
      // hop sooner: while a request is handled the strand does not touch the socket.
      self->SendNow(reply);
      // All of it went: the outputs its tail viewed (and the memory their reply holds in the pool)
      // go here, not when the strand gets to OnWritten. A request run on the event loop may be
      // waiting for that memory, and the strand may be waiting for that event loop.
      if (reply.sent == reply.size()) reply.tail_owner.reset();
      asio::post(self->executor(), [self, reply = std::move(reply)]() mutable { self->Send(std::move(reply)); });
    });
    // Armed after the hand-off, so that the worker starts while this thread asks the event loop
    // to watch the socket (a system call). Its reply comes back to this strand only after this
    // handler, so the watch is in place before the reply is sent.
    WatchForClose(handling);
  }

  // HttpOptions::quick_run_us: a small inference that nothing stands in front of and that was
  // quick last time.
  bool IsQuick() {
    if (t_.options.quick_run_us == 0) return false;
    if (!t_.Lone(this) || framer_->body().size() > kQuickBodyBytes) return false;
    HttpRequest request{framer_->method(), framer_->target(), {}, framer_->body()};
    return t_.api.RunsAtOnce(request, &route_, std::chrono::microseconds(t_.options.quick_run_us));
  }

  // While a request is handled the strand does not read; the socket turning readable then means
  // the client closed its side (EOF or a reset: the request's `cancelled` turns true, so that a
  // request waiting for memory or a worker leaves its place), or pipelined its next request
  // (nothing more can be learnt without reading it: the watch ends). A client that half-closes
  // after sending a request counts as gone: its request still gets an answer if it already runs.
  void WatchForClose(uint64_t handling) {
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this(), handling](const error_code& ec) {
      if (ec || self->phase_ != Phase::kHandling || self->handling_ != handling) return;
      const port::PeerState peer = port::PeekPeer(static_cast<intptr_t>(self->socket_.native_handle()));
      if (peer == port::PeerState::kClosed) {
        self->client_gone_.store(true);
      } else if (peer == port::PeerState::kNothing) {
        self->WatchForClose(handling);  // woken without data
      }
    });
  }

  // Runs the request through the API (any thread; the strand does not touch the request meanwhile).
  HttpReply Handle() {
    HttpRequest request{framer_->method(), framer_->target(), {}, framer_->body()};
    if (inline_socket_ >= 0) {
      request.cancelled = [socket = inline_socket_] { return port::PeekPeer(socket) == port::PeerState::kClosed; };
    } else if (watch_gone_) {
      // The connection outlives its request's handling (the worker holds it): a pointer will do,
      // and keeps the function small enough to be stored without an allocation.
      request.cancelled = [gone = &client_gone_] { return gone->load(); };
    }
    request.headers = std::move(header_views_);  // the list the request before had (its capacity)
    request.headers.clear();
    request.headers.reserve(framer_->headers().size());
    for (const auto& [name, value] : framer_->headers()) request.headers.emplace_back(name, value);
    HttpReply reply;
    try {
      reply = t_.api.Handle(request, route_);
    } catch (const std::exception& e) {
      reply = ErrorReply(500, std::string("internal error (") + e.what() + ")");
    }
    const std::string_view coding = AcceptedCoding(request.Header("Accept-Encoding"));
    const std::string_view type = reply.content_type;
    const bool compressible = type.starts_with("application/json") || type.starts_with("text/");
    if (!coding.empty() && compressible && reply.tail.empty() && reply.body.size() >= kCompressMinBytes &&
        Compress(reply.body, coding == "gzip")) {
      reply.headers.emplace_back("Content-Encoding", coding);
      reply.headers.emplace_back("Vary", "Accept-Encoding");
    }
    header_views_ = std::move(request.headers);  // for the next request
    return reply;
  }

  // A reply on its way out: status line and header fields, body (a string, then the tail: views
  // of memory that `tail_owner` holds, binary outputs sent where they lie), and how much went out.
  struct Outgoing {
    std::string head, body;
    std::vector<std::string_view> tail;
    std::shared_ptr<const void> tail_owner;
    MemoryHold memory;  // released with the rest, once written (or dropped)
    size_t sent = 0;
    bool failed = false;

    // A reply's pieces: head, body and (as a rule) one binary output or none, on the stack.
    using PieceList = boost::container::small_vector<std::string_view, 4>;

    // The pieces in order (computed on each call: moving the strings moves their bytes).
    PieceList Pieces() const {
      PieceList pieces;
      pieces.emplace_back(head);
      if (!body.empty()) pieces.emplace_back(body);
      for (std::string_view piece : tail) pieces.push_back(piece);
      return pieces;
    }
    size_t size() const {
      size_t size = head.size() + body.size();
      for (std::string_view piece : tail) size += piece.size();
      return size;
    }
    // The pieces not yet sent, the first one cut where it was left.
    PieceList Unsent() const {
      PieceList unsent;
      size_t skip = sent;
      for (std::string_view piece : Pieces()) {
        if (skip >= piece.size()) {
          skip -= piece.size();
          continue;
        }
        unsent.push_back(piece.substr(skip));
        skip = 0;
      }
      return unsent;
    }
  };

  Outgoing Prepare(HttpReply reply) const {
    const bool closing = !keep_alive_ || t_.stopping;  // as OnWritten decides
    const std::string_view connection = closing ? "close" : http10_ ? "keep-alive" : "";
    Outgoing out;
    out.head = std::move(head_room_);  // the string the reply before went out in
    FormatHead(reply, reply.body_size(), connection, &out.head);
    if (!head_request_) {
      out.body = std::move(reply.body);
      out.tail = std::move(reply.tail);
      out.tail_owner = std::move(reply.tail_owner);
    }
    out.memory = std::move(reply.memory);
    return out;
  }

  // Writes what the socket takes without waiting (a worker while the request is handled, or the
  // strand), two pieces a system call.
  void SendNow(Outgoing& out) {
    const auto socket = static_cast<intptr_t>(socket_.native_handle());
    const size_t total = out.size();
    while (out.sent < total) {
      const Outgoing::PieceList unsent = out.Unsent();
      const std::string_view second = unsent.size() > 1 ? unsent[1] : std::string_view();
      const int64_t n = port::SendWithoutWaiting(socket, unsent[0].data(), unsent[0].size(), second.data(), second.size());
      if (n <= 0) {
        out.failed = n < 0;
        return;
      }
      out.sent += static_cast<size_t>(n);
    }
  }

  // Sends the rest of a reply (on the strand): what the socket takes at once is written here (a
  // reply made on the event loop usually goes whole, without the round through async_write).
  void Send(Outgoing out) {
    DropRequest();  // the body is freed and its budget given back before the reply goes out
    if (phase_ == Phase::kClosed) return;
    if (!out.failed && out.sent < out.size()) SendNow(out);
    if (out.failed) return CloseNow();
    reply_ = std::move(out);
    phase_ = Phase::kWriting;
    if (reply_.sent == reply_.size()) return OnWritten({});
    SetDeadline(Clock::now() + std::chrono::seconds(t_.options.write_timeout_s));
    boost::container::small_vector<asio::const_buffer, 4> buffers;
    for (std::string_view piece : reply_.Unsent()) buffers.emplace_back(piece.data(), piece.size());
    asio::async_write(socket_, std::move(buffers),
                      [self = shared_from_this()](const error_code& ec, size_t) { self->OnWritten(ec); });
  }

  void OnWritten(const error_code& ec) {
    if (phase_ != Phase::kWriting) return;
    head_room_ = std::move(reply_.head);  // kept for the next reply's head (Prepare)
    reply_ = Outgoing();  // frees the body, and the outputs its tail viewed
    if (ec) return CloseNow();
    if (!keep_alive_ || t_.stopping) return LingeringClose();
    phase_ = Phase::kIdle;
    if (buffer_.size() > 0) {  // a pipelined request; posted, so that many do not nest calls
      asio::post(executor(), [self = shared_from_this()] {
        if (self->phase_ == Phase::kIdle) self->Frame();  // not closed by Stop meanwhile
      });
      return;
    }
    if (buffer_.capacity() > kIdleReadBytes) buffer_.shrink_to_fit();
    Read();
  }

  // An error reply, then the connection closes (its framing can no longer be trusted).
  void Fail(int status, std::string message) {
    keep_alive_ = false;
    head_request_ = false;
    HttpReply reply = ErrorReply(status, message);
    if (status == 503) reply.headers.emplace_back("Retry-After", "1");
    Send(Prepare(std::move(reply)));
  }

  void OnTimeout() {
    const auto now = Clock::now();
    switch (phase_) {
      case Phase::kHeader:
        return TimedOut(now >= header_deadline_ ? "the request header did not arrive within " +
                                                      Seconds(t_.options.header_timeout_s) + " (--header-timeout-s)"
                                                : NoBytes());
      case Phase::kBody:
        return TimedOut(now >= body_deadline_ ? "the request body did not arrive within " +
                                                    Seconds(t_.options.body_timeout_s) + " (--body-timeout-s)"
                                              : NoBytes());
      case Phase::kHandling:
      case Phase::kClosed: return;
      default: return CloseNow();  // idle, or a client that does not read its reply
    }
  }
  std::string NoBytes() const {
    return "no bytes of the request arrived for " + Seconds(t_.options.read_timeout_s) + " (--read-timeout-s)";
  }
  void TimedOut(const std::string& message) {
    error_code ignored;
    socket_.cancel(ignored);  // the pending read
    Fail(408, message);
  }

  // Half-closes, then reads and drops what the client still sends for a while, so that the
  // client reads the reply instead of a reset.
  void LingeringClose() {
    phase_ = Phase::kClosing;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    linger_end_ = Clock::now() + kLingerTotal;
    buffer_.clear();
    Linger();
  }
  void Linger() {
    SetDeadline(std::min(Clock::now() + kLingerRead, linger_end_));
    socket_.async_read_some(buffer_.prepare(kHeaderReadBytes), [self = shared_from_this()](const error_code& ec, size_t) {
      if (self->phase_ != Phase::kClosing) return;
      if (ec) return self->CloseNow();
      self->buffer_.clear();
      self->Linger();
    });
  }

  void CloseNow() {
    if (phase_ == Phase::kClosed) return;
    const bool handling = phase_ == Phase::kHandling;
    phase_ = Phase::kClosed;
    error_code ignored;
    timer_.cancel();
    socket_.close(ignored);  // first: a read in progress may be writing into the request's body
    if (!handling) DropRequest();  // while handling, a worker uses it
  }

  void DropRequest() {
    if (!framer_) return;
    t_.Unreserve(framer_->reserved_bytes());
    framer_.reset();
  }

  // Deadlines: one timer, re-armed lazily. Moving the deadline later costs nothing; the timer
  // fires at the old time and waits again. Clock::time_point::max() = no deadline.
  void SetDeadline(Clock::time_point when) {
    deadline_ = when;
    if (when == Clock::time_point::max() || (timer_armed_ && armed_at_ <= when)) return;
    timer_armed_ = true;
    armed_at_ = when;
    timer_.expires_at(when);  // cancels the wait in progress: its handler sees an old generation
    timer_.async_wait([self = shared_from_this(), generation = ++timer_generation_](const error_code&) {
      self->OnTimer(generation);
    });
  }
  void OnTimer(uint64_t generation) {
    if (generation != timer_generation_ || phase_ == Phase::kClosed) return;
    timer_armed_ = false;
    if (deadline_ == Clock::time_point::max()) return;
    if (Clock::now() >= deadline_) return OnTimeout();
    SetDeadline(deadline_);
  }

  Transport& t_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  const bool refused_;
  Phase phase_ = Phase::kIdle;
  boost::beast::flat_buffer buffer_;        // received, not yet framed
  FramerRoom framer_room_;  // what one request's framer leaves to the next (declared first: it outlives framer_)
  // What one request's handling leaves to the next, for their capacity: the list of its header
  // fields' views (Handle) and the string its reply's head went out in (Prepare, OnWritten). Used
  // by one request at a time, on whichever thread handles it.
  std::vector<std::pair<std::string_view, std::string_view>> header_views_;
  mutable std::string head_room_;
  std::optional<RequestFramer> framer_;  // the request being read or handled (in place: no allocation)
  RestApi::Route route_;                   // where it goes (found in Dispatch)
  bool keep_alive_ = true;
  bool head_request_ = false;
  bool http10_ = false;
  Outgoing reply_;  // the reply being written
  Clock::time_point header_deadline_, body_deadline_, linger_end_;
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::time_point armed_at_;
  bool timer_armed_ = false;
  uint64_t timer_generation_ = 0;
  uint64_t handling_ = 0;                           // requests handled on a worker so far
  intptr_t inline_socket_ = -1;                     // while a request runs inline: its socket
  // The client went away while the request handled on a worker runs (WatchForClose sets it);
  // watch_gone_: that request is watched (a request run inline asks the socket instead).
  std::atomic<bool> client_gone_{false};
  bool watch_gone_ = false;
};

// Raises the soft limit on open files to `needed` when it is lower.
Status RaiseOpenFileLimit(size_t needed, size_t max_connections) {
  const int64_t hard = port::RaiseOpenFileLimit(needed);
  if (hard >= 0) {
    return InvalidArgument("--max-connections " + std::to_string(max_connections) + " needs " + std::to_string(needed) +
                           " open files, but their hard limit (ulimit -Hn) is " + std::to_string(hard));
  }
  return Status::Ok();
}

Status Transport::Bind() {
  const HttpOptions& o = options;
  if (o.threads == 0 || o.io_threads == 0 || o.max_connections == 0 || o.max_header_bytes == 0 || o.max_uri_bytes == 0) {
    return InvalidArgument("HTTP threads, connections and header limits must be at least 1");
  }
  if (o.read_timeout_s <= 0 || o.write_timeout_s <= 0 || o.header_timeout_s <= 0 || o.body_timeout_s <= 0 ||
      o.idle_timeout_s <= 0) {
    return InvalidArgument("HTTP timeouts must be at least 1 s");
  }
  if (Status st = RaiseOpenFileLimit(o.max_connections + kMaxRefusing + kExtraFiles, o.max_connections); !st.ok()) {
    return st;
  }
  const std::string where = o.host + ":" + std::to_string(o.port);
  error_code ec;
  tcp::resolver resolver(io);
  const auto endpoints = resolver.resolve(o.host, std::to_string(o.port), tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) return Unavailable("cannot listen on " + where + ": " + ec.message());
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Unavailable("cannot listen on " + where + ": " + ec.message());
  port = acceptor.local_endpoint().port();
  return Status::Ok();
}

void Transport::Accept() {
  // A connection's handlers run one at a time: on its own strand where several threads run the
  // event loop; with one (the default) the loop itself keeps them in order, and a strand would only
  // add its lock and queue to every completion.
  const asio::any_io_executor executor =
      options.io_threads > 1 ? asio::any_io_executor(asio::make_strand(io)) : asio::any_io_executor(io.get_executor());
  acceptor.async_accept(executor, [this](const error_code& ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void Transport::OnAccept(const error_code& ec, tcp::socket socket) {
  if (stopping || ec == asio::error::operation_aborted || !acceptor.is_open()) return;
  if (ec && ec != asio::error::connection_aborted) {
    // Out of descriptors or memory: try again shortly instead of spinning.
    accept_retry.expires_after(std::chrono::milliseconds(50));
    accept_retry.async_wait([this](const error_code& e) {
      if (!e && !stopping) Accept();
    });
    return;
  }
  if (!ec) {
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // small replies must not wait for delayed ACKs
    bool refused = false;
    if (connections.load() >= options.max_connections) {
      refused = true;
      if (refusing.load() >= kMaxRefusing) socket.close(ignored);
    }
    if (socket.is_open()) {
      (refused ? refusing : connections).fetch_add(1);
      auto connection = std::make_shared<Connection>(*this, std::move(socket), refused);
      asio::post(connection->executor(), [connection] { connection->Start(); });
    }
  }
  Accept();
}

void Transport::Serve() {
  asio::post(acceptor.get_executor(), [this] { Accept(); });
  auto run = [this] {
    for (;;) {
      try {
        io.run();
        return;
      } catch (const std::exception&) {
        // A handler threw (out of memory): that connection is lost, the others go on.
      }
    }
  };
  std::vector<std::thread> more;
  for (size_t i = 1; i < options.io_threads; ++i) more.emplace_back(run);
  run();
  for (std::thread& thread : more) thread.join();
  workers.join();
  control.join();
}

void Transport::Stop() {
  stopping = true;
  asio::post(acceptor.get_executor(), [this] {
    error_code ignored;
    acceptor.close(ignored);
    accept_retry.cancel();
  });
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lock(mu);
    for (Connection* c : live) {
      if (auto connection = c->weak_from_this().lock()) open.push_back(std::move(connection));
    }
  }
  // Outside the lock: the last reference to a connection may go here, and its destructor locks mu.
  for (const auto& connection : open) asio::post(connection->executor(), [connection] { connection->OnStop(); });
}

}  // namespace

struct HttpServer::Impl {
  Impl(RestApi& api, HttpOptions options, ByteBudget& budget) : transport(api, std::move(options), budget) {}
  Transport transport;
};

HttpServer::HttpServer(RestApi& api, HttpOptions options, ByteBudget& body_budget)
    : impl_(std::make_unique<Impl>(api, std::move(options), body_budget)) {}

HttpServer::~HttpServer() = default;

Status HttpServer::Bind() { return impl_->transport.Bind(); }

int HttpServer::port() const { return impl_->transport.port; }

void HttpServer::Serve() { impl_->transport.Serve(); }

void HttpServer::Stop() { impl_->transport.Stop(); }

}  // namespace ebb::server
