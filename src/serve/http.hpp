// src/serve/http.hpp: the HTTP/1.1 layer of the server, on Boost.Beast. Every connection is a chain of
// asynchronous reads and writes on a few threads, so hundreds of keep-alive connections cost a socket and a
// buffer each, not a thread, and a client that sends one byte a second holds nothing but its own socket until
// its timeout. A connection reads its next request only after answering the last, so its answers keep the
// order of its requests.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "oar/serve/server.hpp"

namespace oar::serve {

/// Answers a request, once, from any thread. `keep` is released on the connection's thread after the answer
/// is written (what the answer was computed with, e.g. the model version, outlives the computing thread).
using Reply = std::function<void(HttpResponse, std::shared_ptr<void> keep)>;
using Dispatch = std::function<void(HttpRequest&&, Reply)>;

class HttpServer {
 public:
  /// Binds and listens (oar::Error naming host:port when it cannot), then serves on `threads` threads.
  /// `on_status` sees every status code answered.
  HttpServer(const std::string& host, uint16_t port, int threads, const Limits& limits, Dispatch dispatch, std::function<void(int)> on_status);
  ~HttpServer();
  uint16_t port() const;
  /// Stops accepting, waits (up to `grace_s`) for the requests being answered, then stops the threads.
  void stop(double grace_s = 10);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace oar::serve
