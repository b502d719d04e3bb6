// oar/serve/server.hpp: an inference server speaking the KServe v2 / Open Inference Protocol over HTTP, so
// that standard clients (Triton's tritonclient, KServe's) talk to oar models unchanged. It serves a model
// repository: REPO/<model>/<version>/ holds an inference model (Model::save_inference), REPO/<model>/config.json
// optionally says how many evaluators run it and whether requests are batched (docs/serving.md).
//
// Link `oar::serve` (liboar_serve; Boost.Beast and nlohmann-json stay inside it):
//
//   oar::serve::Server server("models", {.port = 8000});
//   server.route("GET", "/hello", [](const oar::serve::HttpRequest&) { return oar::serve::HttpResponse{200, "text/plain", "hi\n"}; });
//   server.start();   // loads every model, then listens on 127.0.0.1:8000
//   server.wait();    // until stop() (the `oar serve` command stops on SIGINT / SIGTERM)
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace oar::serve {

/// What one client may ask of the server. A request over a limit is refused (413, 431) or its connection
/// closed, and nothing else is held up: connections are served asynchronously, never a thread each.
struct Limits {
  size_t max_body_bytes = size_t(64) << 20;
  size_t max_header_bytes = size_t(16) << 10;
  int64_t max_elements = int64_t(1) << 26;  ///< per input tensor
  double idle_timeout_s = 60;               ///< a keep-alive connection waiting for its next request
  double request_timeout_s = 30;            ///< to receive one whole request once it has begun
};

struct ServerOptions {
  std::string host = "127.0.0.1";  ///< the address to listen on; "0.0.0.0" to be reachable from other machines
  uint16_t port = 8000;             ///< 0: any free port (Server::port() says which)
  int http_threads = 1;             ///< threads reading and writing connections (the models run on their own)
  std::string api_key;              ///< when set, every endpoint but /v2/health/* needs `Authorization: Bearer <key>`
  Limits limits;
  bool log_requests = false;        ///< a line per request on stderr
};

struct HttpRequest {
  std::string method, target, body;                         ///< target: path and query as sent
  std::vector<std::pair<std::string, std::string>> headers;  ///< names in lower case
  /// The value of header `name` (lower case), or "" when absent.
  std::string header(const std::string& name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers = {};
};

/// A user's own endpoint, answered on an HTTP thread (keep it short).
using Handler = std::function<HttpResponse(const HttpRequest&)>;

/// One model of the repository as the index reports it.
struct ModelStatus {
  std::string name;
  int64_t version = 0;       ///< the version served (0: none)
  std::string state;         ///< "READY", "UNAVAILABLE"
  std::string reason;        ///< why it is unavailable
};

class Server {
 public:
  /// Nothing is loaded or bound until start().
  explicit Server(std::filesystem::path repository, ServerOptions options = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// A user endpoint: `method` and an exact path, matched before the protocol's own (the query string is not
  /// part of the match). Call before start().
  void route(std::string method, std::string path, Handler handler);
  /// Listens, then loads every model of the repository (an oar::Error naming the model and file when one
  /// fails, the server stopped); returns once every model is served. While they load, /v2/health/live
  /// answers 200, /v2/health/ready and the model endpoints 503.
  void start();
  /// The port it listens on (the one chosen when ServerOptions::port was 0).
  uint16_t port() const;
  /// Stops accepting, lets the requests being answered finish, stops the models' threads. Idempotent.
  void stop();
  /// Blocks until stop() has been called (from another thread or a signal handler's thread).
  void wait();

  /// Loads the newest version of REPO/<model> and serves it from then on (the repository extension's load):
  /// requests already taken finish on the version they started on. oar::Error when the model's files are bad;
  /// the version being served, if any, stays.
  void load(const std::string& model);
  /// Stops serving `model` once its requests in flight are answered.
  void unload(const std::string& model);
  std::vector<ModelStatus> index() const;
  /// The Prometheus text exposition of the server's metrics (what GET /metrics answers).
  std::string metrics_text() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace oar::serve
