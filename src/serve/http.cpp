// src/serve/http.cpp: see http.hpp. Follows the shape of Beast's advanced asynchronous server example: an
// acceptor handing each socket to a session on its own strand (when several threads run the io_context).
#include "src/serve/http.hpp"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "oar/core/error.hpp"

namespace oar::serve {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

std::string HttpRequest::header(const std::string& name) const {
  for (auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

namespace {

struct Shared {
  Limits limits;
  Dispatch dispatch;
  std::function<void(int)> on_status;
  std::atomic<int64_t> busy{0};  // requests read and not yet answered
  std::atomic<bool> stopping{false};
};

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, Shared& shared) : stream_(std::move(socket)), shared_(shared) {}

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_header(); });
  }

 private:
  void read_header() {
    if (shared_.stopping) return close();
    parser_.emplace();
    parser_->header_limit(std::uint32_t(std::min<size_t>(shared_.limits.max_header_bytes, UINT32_MAX)));
    parser_->body_limit(shared_.limits.max_body_bytes);
    stream_.expires_after(seconds(shared_.limits.idle_timeout_s));
    http::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return fail(ec);
    stream_.expires_after(seconds(shared_.limits.request_timeout_s));
    auto& req = parser_->get();
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      http::async_write(stream_, *cont, [self = shared_from_this(), cont](beast::error_code ec, size_t) {
        if (ec) return self->fail(ec);
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  /// A read that failed: the client left or timed out (close), or sent what cannot be read (answer, close).
  void fail(beast::error_code ec) {
    if (ec == http::error::body_limit)
      return answer_and_close(413, fmt::format("the request body is over the server's limit of {} bytes", shared_.limits.max_body_bytes));
    if (ec == http::error::header_limit)
      return answer_and_close(431, fmt::format("the request's headers are over the server's limit of {} bytes", shared_.limits.max_header_bytes));
    if (ec.category() == beast::error_code(http::error::end_of_stream).category() && ec != http::error::end_of_stream && ec != http::error::partial_message)
      return answer_and_close(400, fmt::format("malformed HTTP request: {}", ec.message()));
    close();
  }

  void answer_and_close(int status, const std::string& message) {
    keep_alive_ = false;
    std::string quoted;  // the message as a JSON string (this layer has no JSON library)
    for (unsigned char c : message) {
      if (c == '"' || c == '\\') quoted += {'\\', char(c)};
      else if (c < 0x20) quoted += fmt::format("\\u{:04x}", c);
      else quoted += char(c);
    }
    HttpResponse r{status, "application/json", "{\"error\":\"" + quoted + "\"}"};
    write(std::move(r), nullptr);
  }

  void on_read(beast::error_code ec) {
    if (ec) return fail(ec);
    stream_.expires_never();  // the model may take its time; the answer's write has its own deadline
    auto msg = parser_->release();
    keep_alive_ = msg.keep_alive();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    for (auto& f : msg) {
      std::string k(f.name_string());
      for (auto& c : k) c = char(std::tolower((unsigned char)c));
      req.headers.emplace_back(std::move(k), std::string(f.value()));
    }
    req.body = std::move(msg.body());
    ++shared_.busy;
    Reply reply = [self = shared_from_this()](HttpResponse r, std::shared_ptr<void> keep) {
      net::post(self->stream_.get_executor(), [self, r = std::move(r), keep = std::move(keep)]() mutable {
        self->write(std::move(r), std::move(keep));
        --self->shared_.busy;
      });
    };
    try {
      shared_.dispatch(std::move(req), std::move(reply));
    } catch (const std::exception& e) {
      --shared_.busy;
      answer_and_close(500, e.what());
    }
  }

  void write(HttpResponse r, std::shared_ptr<void> keep) {
    keep_ = std::move(keep);
    if (shared_.on_status) shared_.on_status(r.status);
    res_ = {};
    res_.result(unsigned(r.status));
    res_.version(11);
    res_.set(http::field::server, "oar");
    res_.set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) res_.set(k, v);
    res_.body() = std::move(r.body);
    res_.keep_alive(keep_alive_ && !shared_.stopping);
    res_.prepare_payload();
    stream_.expires_after(seconds(shared_.limits.request_timeout_s));
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->keep_.reset();
      if (ec) return self->close();
      if (!self->res_.keep_alive()) return self->drain_and_close();
      self->read_header();
    });
  }

  /// Closing a socket with unread bytes makes the kernel reset the connection, and the client may lose the
  /// answer just written (a 413 before the whole body was read): end sending, read and drop what the client
  /// still sends for a moment, then close.
  void drain_and_close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(seconds(2));
    drain_.resize(64 << 10);
    drain_more();
  }

  void drain_more() {
    stream_.async_read_some(net::buffer(drain_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->drain_more();
    });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  Shared& shared_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  std::shared_ptr<void> keep_;
  std::vector<char> drain_;
  bool keep_alive_ = true;
};

}  // namespace

struct HttpServer::Impl {
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  Shared shared;
  std::vector<std::thread> threads;
  uint16_t port = 0;
  bool stopped = false;

  int nthreads = 1;

  void accept() {
    // With one thread running the io_context every handler already runs in order on it: a strand per connection
    // would only add its locking and its reference counting to every read and write.
    auto exec = nthreads == 1 ? net::any_io_executor(ioc.get_executor()) : net::any_io_executor(net::make_strand(ioc));
    acceptor.async_accept(exec, [this](beast::error_code ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;
      if (!ec) std::make_shared<Session>(std::move(socket), shared)->start();
      accept();
    });
  }
};

HttpServer::HttpServer(const std::string& host, uint16_t port, int threads, const Limits& limits, Dispatch dispatch, std::function<void(int)> on_status)
    : impl_(std::make_unique<Impl>()) {
  impl_->shared.limits = limits;
  impl_->shared.dispatch = std::move(dispatch);
  impl_->shared.on_status = std::move(on_status);
  beast::error_code ec;
  const auto addr = net::ip::make_address(host, ec);
  if (ec) throw Error(fmt::format("cannot listen on '{}': not an IP address (e.g. 127.0.0.1, 0.0.0.0, ::1)", host));
  const tcp::endpoint ep{addr, port};
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw Error(fmt::format("cannot listen on {}:{}: {}", host, port, ec.message()));
  impl_->port = a.local_endpoint().port();
  impl_->nthreads = std::max(1, threads);
  impl_->accept();
  for (int i = 0; i < std::max(1, threads); ++i) impl_->threads.emplace_back([this] { impl_->ioc.run(); });
}

HttpServer::~HttpServer() { stop(0); }

uint16_t HttpServer::port() const { return impl_->port; }

void HttpServer::stop(double grace_s) {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->shared.stopping = true;
  net::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  const auto until = std::chrono::steady_clock::now() + seconds(grace_s);
  while (impl_->shared.busy > 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
}

}  // namespace oar::serve
