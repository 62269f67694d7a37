// RawExchange (bench_server.h): the raw loopback exchange `bench http` and `bench grpc` compare a
// transport's overhead with, and LeanHttpClient, `bench http`'s client for that comparison, both
// over Boost.Asio's blocking sockets (the server's transport library).
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <cctype>
#include <charconv>
#include <string_view>
#include <utility>

#include "bench_server.h"

namespace ebb::cli {

namespace asio = boost::asio;
using asio::ip::tcp;

struct RawExchange::Connection {
  asio::io_context io;
  tcp::socket client{io};
  tcp::socket server{io};  // the accepted end
  std::thread serving;
};

namespace {

// The server's side: reads exactly request_bytes, writes `reply`, until the client closes the connection.
void Serve(tcp::socket& socket, size_t request_bytes, const std::string& reply) {
  std::string request(request_bytes, '\0');
  boost::system::error_code ec;
  while (!ec) {
    asio::read(socket, asio::buffer(request), ec);
    if (!ec) asio::write(socket, asio::buffer(reply), ec);
  }
}

}  // namespace

std::unique_ptr<RawExchange> RawExchange::Start(std::string request, std::string reply) {
  std::unique_ptr<RawExchange> r(new RawExchange());
  r->request_ = std::move(request);
  r->reply_ = std::move(reply);
  r->reply_read_.assign(r->reply_.size(), '\0');
  r->connection_ = std::make_unique<Connection>();
  Connection& c = *r->connection_;
  boost::system::error_code ec;
  tcp::acceptor acceptor(c.io);
  const tcp::endpoint loopback(asio::ip::address_v4::loopback(), 0);
  acceptor.open(loopback.protocol(), ec);
  if (!ec) acceptor.bind(loopback, ec);
  if (!ec) acceptor.listen(1, ec);
  if (!ec) c.client.connect(acceptor.local_endpoint(), ec);  // completes in the listener's backlog
  if (!ec) acceptor.accept(c.server, ec);
  if (!ec) c.client.set_option(tcp::no_delay(true), ec);
  if (!ec) c.server.set_option(tcp::no_delay(true), ec);
  if (ec) return Fail(Internal("cannot set up the raw loopback exchange: " + ec.message())), nullptr;
  c.serving = std::thread([&c, bytes = r->request_.size(), &reply = r->reply_] { Serve(c.server, bytes, reply); });
  return r;
}

RawExchange::~RawExchange() {
  if (!connection_) return;
  boost::system::error_code ec;
  connection_->client.shutdown(tcp::socket::shutdown_both, ec);  // the server's read ends
  connection_->client.close(ec);
  if (connection_->serving.joinable()) connection_->serving.join();
}

bool RawExchange::Exchange() {
  boost::system::error_code ec;
  asio::write(connection_->client, asio::buffer(request_), ec);
  if (!ec) asio::read(connection_->client, asio::buffer(reply_read_), ec);
  return !ec;
}

void RawExchange::AddKinds(std::vector<TimedKind>* kinds) {
  kinds->push_back({&times_us_, [this] { return Exchange(); }});
  kinds->push_back({&again_us_, [this] { return Exchange(); }});
}

nlohmann::json RawExchange::Figures() const {
  const double p50 = Median(times_us_), again = Median(again_us_);
  return {{"request_bytes", request_.size()},
          {"reply_bytes", reply_.size()},
          {"p50_us", p50},
          {"p99_us", Percentile(times_us_, 0.99)},
          {"again_p50_us", again},
          {"aa_ratio", again / p50}};
}

struct LeanHttpClient::Connection {
  asio::io_context io;
  tcp::socket socket{io};
};

namespace {

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

// What LeanHttpClient needs of a reply's head (its status line and headers, CRLFCRLF excluded).
struct ReplyHead {
  bool ok = false;              // status 200 with a Content-Length and an Inference-Header-Content-Length
  size_t content_length = 0;
};

ReplyHead ParseReplyHead(std::string_view head) {
  ReplyHead parsed;
  size_t eol = head.find("\r\n");
  const std::string_view status = head.substr(0, eol);
  const bool status_ok = status.size() >= 12 && status.substr(0, 5) == "HTTP/" && status.substr(8, 4) == " 200";
  bool has_length = false, has_header_length = false;
  while (eol != std::string_view::npos) {
    const size_t start = eol + 2;
    eol = head.find("\r\n", start);
    const std::string_view line = head.substr(start, eol == std::string_view::npos ? head.npos : eol - start);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (EqualsIgnoringCase(name, "Content-Length")) {
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed.content_length);
      has_length = ec == std::errc() && end == value.data() + value.size();
    } else if (EqualsIgnoringCase(name, "Inference-Header-Content-Length")) {
      has_header_length = true;
    }
  }
  parsed.ok = status_ok && has_length && has_header_length;
  return parsed;
}

}  // namespace

std::unique_ptr<LeanHttpClient> LeanHttpClient::Connect(int port, std::string request) {
  std::unique_ptr<LeanHttpClient> c(new LeanHttpClient());
  c->request_ = std::move(request);
  c->reply_.assign(64 * 1024, '\0');  // grows to the largest reply, once
  c->connection_ = std::make_unique<Connection>();
  boost::system::error_code ec;
  const tcp::endpoint server(asio::ip::address_v4::loopback(), static_cast<unsigned short>(port));
  c->connection_->socket.connect(server, ec);
  if (!ec) c->connection_->socket.set_option(tcp::no_delay(true), ec);
  if (ec) return Fail(Internal("cannot connect to 127.0.0.1:" + std::to_string(port) + ": " + ec.message())), nullptr;
  return c;
}

LeanHttpClient::~LeanHttpClient() {
  if (!connection_) return;
  boost::system::error_code ec;
  connection_->socket.shutdown(tcp::socket::shutdown_both, ec);
  connection_->socket.close(ec);
}

bool LeanHttpClient::Exchange() {
  tcp::socket& socket = connection_->socket;
  boost::system::error_code ec;
  if (!socket.is_open()) return false;
  asio::write(socket, asio::buffer(request_), ec);
  // The head: read until CRLFCRLF (what came after it is the body's start).
  size_t have = 0, head_end = std::string::npos;
  while (!ec && head_end == std::string::npos) {
    if (have == reply_.size()) reply_.resize(reply_.size() * 2);
    have += socket.read_some(asio::buffer(reply_.data() + have, reply_.size() - have), ec);
    head_end = std::string_view(reply_.data(), have).find("\r\n\r\n");
  }
  ReplyHead head;
  if (!ec) head = ParseReplyHead(std::string_view(reply_.data(), head_end));
  const size_t total = head_end + 4 + head.content_length;
  if (!ec && head.ok && have <= total) {
    if (reply_.size() < total) reply_.resize(total);
    asio::read(socket, asio::buffer(reply_.data() + have, total - have), ec);
    reply_bytes_ = total;
    if (!ec) return true;
  }
  socket.close(ec);  // a reply it cannot follow: the connection's state is unknown
  return false;
}

}  // namespace ebb::cli
