// src/serve/server.cpp: oar::serve::Server: the protocol's endpoints routed to the model store, the API key,
// the repository extension's load and unload (run on a thread of their own, so that loading a model never
// holds up the connections), and the metrics.
#include "oar/serve/server.hpp"

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "oar/config.hpp"
#include "oar/core/error.hpp"
#include "src/serve/http.hpp"
#include "src/serve/metrics.hpp"
#include "src/serve/model_store.hpp"
#include "src/serve/protocol.hpp"

namespace oar::serve {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// The path of a request target, cut into its '/'-separated segments, each percent-decoded ("" when the
/// encoding is bad, which no route matches).
std::vector<std::string> segments(std::string_view target) {
  target = target.substr(0, target.find('?'));
  std::vector<std::string> out;
  size_t i = 0;
  while (i < target.size()) {
    if (target[i] == '/') {
      ++i;
      continue;
    }
    const size_t j = std::min(target.find('/', i), target.size());
    std::string seg;
    for (size_t k = i; k < j; ++k) {
      if (target[k] == '%' && k + 2 < j && std::isxdigit((unsigned char)target[k + 1]) && std::isxdigit((unsigned char)target[k + 2])) {
        seg += char(std::stoi(std::string(target.substr(k + 1, 2)), nullptr, 16));
        k += 2;
      } else if (target[k] == '%') {
        seg.clear();
        break;
      } else {
        seg += target[k];
      }
    }
    out.push_back(std::move(seg));
    i = j;
  }
  return out;
}

HttpResponse ok_json(const json& j) { return {200, "application/json", j.dump(-1, ' ', false, json::error_handler_t::replace)}; }

/// A whole number made of digits only (a version, a header's length), or -1.
int64_t parse_count(const std::string& s) {
  if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  return std::stoll(s);
}

}  // namespace

struct Server::Impl {
  fs::path repo;
  ServerOptions options;
  Metrics metrics;
  ModelStore store{repo, metrics};
  std::unique_ptr<HttpServer> http;
  struct Route {
    std::string method, path;
    Handler handler;
  };
  std::vector<Route> routes;

  // load / unload requests, one at a time, off the connections' threads
  std::thread manager;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks;
  std::atomic<bool> started{false};  // every model of the repository loaded
  bool stopping = false, stopped = false;

  Impl(fs::path r, ServerOptions o) : repo(std::move(r)), options(std::move(o)) {}

  void manage() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stopping || !tasks.empty(); });
        if (tasks.empty()) return;
        task = std::move(tasks.front());
        tasks.pop_front();
      }
      task();
    }
  }

  bool authorized(const HttpRequest& req) const {
    if (options.api_key.empty()) return true;
    const std::string got = req.header("authorization"), want = "Bearer " + options.api_key;
    unsigned diff = got.size() != want.size();
    for (size_t i = 0; i < want.size(); ++i) diff |= unsigned(i < got.size() ? got[i] : 0) ^ unsigned(want[i]);
    return diff == 0;
  }

  void dispatch(HttpRequest&& req, Reply reply) {
    auto answer = [&](HttpResponse r) { reply(std::move(r), nullptr); };
    auto error = [&](int status, const std::string& msg) { answer(error_response(status, msg)); };
    const std::string path = req.target.substr(0, req.target.find('?'));
    if (options.log_requests) std::fprintf(stderr, "oar serve: %s %s\n", req.method.c_str(), req.target.c_str());
    for (auto& r : routes)
      if (r.path == path && r.method == req.method) return answer(r.handler(req));
    const std::vector<std::string> seg = segments(req.target);
    auto method = [&](const char* m) {
      if (req.method == m) return true;
      error(405, fmt::format("{} takes {}, not {}", path, m, req.method));
      return false;
    };
    if (seg.size() == 3 && seg[0] == "v2" && seg[1] == "health" && (seg[2] == "live" || seg[2] == "ready")) {
      if (!method("GET")) return;
      if (seg[2] == "live" || started) return answer({200, "application/json", ""});
      return error(503, "the server is starting: not every model is loaded yet");
    }
    if (!authorized(req)) {
      HttpResponse r = error_response(401, "this server needs an API key: send `Authorization: Bearer <key>`");
      r.headers.push_back({"WWW-Authenticate", "Bearer"});
      return answer(std::move(r));
    }
    if (seg.size() == 1 && seg[0] == "metrics") {
      if (!method("GET")) return;
      return answer({200, "text/plain; version=0.0.4", metrics.text()});
    }
    if (seg.size() == 1 && seg[0] == "v2") {
      if (!method("GET")) return;
      return answer(ok_json({{"name", "oar"}, {"version", fmt::format("{}.{}.{}", OAR_VERSION_MAJOR, OAR_VERSION_MINOR, OAR_VERSION_PATCH)}, {"extensions", {"binary_tensor_data", "model_repository"}}}));
    }
    if (!started && seg.size() >= 2 && seg[0] == "v2" && (seg[1] == "repository" || seg[1] == "models"))
      return error(503, "the server is loading its models");
    if (seg.size() >= 3 && seg[0] == "v2" && seg[1] == "repository") return repository(req, seg, std::move(reply));
    if (seg.size() >= 3 && seg[0] == "v2" && seg[1] == "models") return model(std::move(req), seg, std::move(reply));
    error(404, fmt::format("no endpoint {} {}", req.method, path));
  }

  void repository(const HttpRequest& req, const std::vector<std::string>& seg, Reply reply) {
    auto error = [&](int status, const std::string& msg) { reply(error_response(status, msg), nullptr); };
    if (req.method != "POST") return error(405, fmt::format("the repository endpoints take POST, not {}", req.method));
    if (seg.size() == 3 && seg[2] == "index") {
      json a = json::array();
      for (auto& s : store.index()) {
        json e{{"name", s.name}, {"state", s.state}};
        if (s.version) e["version"] = std::to_string(s.version);
        if (!s.reason.empty()) e["reason"] = s.reason;
        a.push_back(std::move(e));
      }
      return reply(ok_json(a), nullptr);
    }
    if (seg.size() != 5 || seg[2] != "models" || (seg[4] != "load" && seg[4] != "unload")) return error(404, "no such repository endpoint");
    const std::string name = seg[3];
    if (!valid_model_name(name)) return error(400, fmt::format("'{}' is not a model name (letters, digits, '_', '-', '.'; not starting with '.')", name));
    std::error_code ec;
    if (seg[4] == "load" && !fs::is_directory(repo / name, ec)) return error(404, fmt::format("no model '{}' in the repository", name));
    const bool load = seg[4] == "load";
    std::lock_guard lock(mu);
    if (stopping) return error(503, "the server is stopping");
    tasks.push_back([this, name, load, reply = std::move(reply)] {
      try {
        if (load) store.load(name);
        else store.unload(name);
        reply({200, "application/json", ""}, nullptr);
      } catch (const std::exception& e) {
        reply(error_response(load ? 400 : 404, e.what()), nullptr);
      }
    });
    cv.notify_all();
  }

  void model(HttpRequest&& req, const std::vector<std::string>& seg, Reply reply) {
    auto error = [&](int status, const std::string& msg) { reply(error_response(status, msg), nullptr); };
    const std::string& name = seg[2];
    int64_t version = 0;
    size_t at = 3;
    if (seg.size() >= 5 && seg[3] == "versions") {
      version = parse_count(seg[4]);
      if (version <= 0) return error(400, fmt::format("'{}' is not a model version (a positive number)", seg[4]));
      at = 5;
    }
    const std::string action = seg.size() == at ? "" : seg.size() == at + 1 ? seg[at] : "?";
    if (action != "" && action != "ready" && action != "infer") return error(404, fmt::format("no endpoint {} {}", req.method, req.target));
    if (req.method != (action == "infer" ? "POST" : "GET"))
      return error(405, fmt::format("{} takes {}, not {}", req.target, action == "infer" ? "POST" : "GET", req.method));
    std::shared_ptr<ModelVersion> mv = store.find(name, version);
    if (!mv) {
      auto any = store.find(name);
      if (any) return error(404, fmt::format("model '{}' has no version {} being served (version {} is)", name, version, any->version()));
      return error(404, fmt::format("model '{}' is not being served", name));
    }
    if (action == "") return reply({200, "application/json", model_metadata(*mv)}, nullptr);
    if (action == "ready") return reply(ok_json({{"name", name}, {"ready", true}}), nullptr);

    const auto arrived = std::chrono::steady_clock::now();
    std::optional<size_t> json_bytes;
    if (const std::string h = req.header("inference-header-content-length"); !h.empty()) {
      const int64_t n = parse_count(h);
      if (n < 0) return error(400, fmt::format("Inference-Header-Content-Length '{}' is not a number", h));
      json_bytes = size_t(n);
    }
    InferRequest ir;
    try {
      ir = parse_infer(*mv, req.body, json_bytes, options.limits);
    } catch (const RequestError& e) {
      mv->metrics().failure += 1;
      return error(e.status(), e.what());
    }
    InferJob job;
    job.inputs = std::move(ir.inputs);
    job.rows = ir.rows;
    job.arrived = arrived;
    job.done = [mv, reply, ir = std::move(ir)](InferResult&& r) mutable {
      HttpResponse resp = r.status == 200 ? infer_response(*mv, ir, r.outputs) : error_response(r.status, r.error);
      reply(std::move(resp), std::move(mv));  // the version is let go on the connection's thread, never on its own
    };
    mv->submit(std::move(job));
  }
};

Server::Server(fs::path repository, ServerOptions options) : impl_(std::make_unique<Impl>(std::move(repository), std::move(options))) {}

Server::~Server() { stop(); }

void Server::route(std::string method, std::string path, Handler handler) {
  OAR_CHECK(!impl_->http, "Server::route: call it before start()");
  impl_->routes.push_back({std::move(method), std::move(path), std::move(handler)});
}

void Server::start() {
  OAR_CHECK(!impl_->http, "Server::start: already started");
  impl_->manager = std::thread([this] { impl_->manage(); });
  // Listening first: while the models load, /v2/health/live answers 200 and /v2/health/ready 503, as an
  // orchestrator's probes expect of a server that is up but not ready.
  impl_->http = std::make_unique<HttpServer>(
      impl_->options.host, impl_->options.port, impl_->options.http_threads, impl_->options.limits,
      [this](HttpRequest&& req, Reply reply) { impl_->dispatch(std::move(req), std::move(reply)); }, [this](int code) { impl_->metrics.http_status(code); });
  try {
    impl_->store.load_all();
  } catch (...) {
    stop();
    throw;
  }
  impl_->started = true;
}

uint16_t Server::port() const { return impl_->http ? impl_->http->port() : 0; }

void Server::stop() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->http) impl_->http->stop();
  if (impl_->manager.joinable()) impl_->manager.join();
  // The models go before the HTTP layer's event loop: their last answers are posted to it.
  impl_->store.unload_all();
  impl_->http.reset();
  std::lock_guard lock(impl_->mu);
  impl_->stopped = true;
  impl_->cv.notify_all();
}

void Server::wait() {
  std::unique_lock lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return impl_->stopped; });
}

void Server::load(const std::string& model) { impl_->store.load(model); }
void Server::unload(const std::string& model) { impl_->store.unload(model); }
std::vector<ModelStatus> Server::index() const { return impl_->store.index(); }
std::string Server::metrics_text() const { return impl_->metrics.text(); }

}  // namespace oar::serve
