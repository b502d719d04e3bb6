// tests/serve/embed.cpp: oar::serve::Server as a library inside a program of its own: a user route next to the
// protocol's endpoints, port 0, load / unload / index from C++, metrics_text, and a bad repository refused by
// start() with an error naming it. The client is a plain socket, so that what goes over the wire is checked.
// Usage: serve_embed OUTDIR (a fixture directory written by serve_fixture).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <oar/serve/server.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

/// Sends `request` to 127.0.0.1:port and reads until the server closes: the whole answer.
std::string round_trip(uint16_t port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::send(fd, request.data(), request.size(), 0) == ssize_t(request.size())) {
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, size_t(n));
  }
  ::close(fd);
  return out;
}

std::string get(uint16_t port, const std::string& path) { return round_trip(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); }

std::string post(uint16_t port, const std::string& path, const std::string& body) {
  return round_trip(port, "POST " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body);
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: serve_embed OUTDIR\n");
    return 2;
  }
  const fs::path repo = fs::path(argv[1]) / "repo";
  {
    oar::serve::Server server(repo, {.port = 0});
    int calls = 0;
    server.route("GET", "/hello", [&](const oar::serve::HttpRequest& r) {
      ++calls;
      return oar::serve::HttpResponse{200, "text/plain", "hi " + r.header("x-who") + "\n"};
    });
    server.start();
    const uint16_t port = server.port();
    check(port != 0, "start() listens on a port of its own (" + std::to_string(port) + ")");
    const std::string hello = round_trip(port, "GET /hello?q=1 HTTP/1.1\r\nHost: x\r\nX-Who: you\r\nConnection: close\r\n\r\n");
    check(has(hello, "HTTP/1.1 200") && has(hello, "\r\n\r\nhi you\n") && calls == 1, "the user route answers, with the request's header, the query ignored");
    check(has(get(port, "/v2/health/ready"), "HTTP/1.1 200"), "the protocol's endpoints beside it: ready");
    check(has(post(port, "/hello", "{}"), "HTTP/1.1 404"), "the route is for GET only: POST /hello is not found");
    std::string ready = get(port, "/v2/models/mlp/ready");
    check(has(ready, "HTTP/1.1 200") && has(ready, "\"ready\":true"), "mlp is served");

    bool both = false;
    for (auto& s : server.index()) both = both || (s.name == "mlp" && s.state == "READY" && s.version == 1);
    check(both, "index(): mlp version 1 READY");
    server.unload("mlp");
    check(has(get(port, "/v2/models/mlp/ready"), "HTTP/1.1 404"), "unload() from C++: mlp is no longer served");
    server.load("mlp");
    check(has(get(port, "/v2/models/mlp/ready"), "HTTP/1.1 200"), "load() from C++: served again");
    bool refused = false;
    try {
      server.load("../escape");
    } catch (const std::exception& e) {
      refused = has(e.what(), "not a model name");
    }
    check(refused, "load() of a name leaving the repository is refused");

    std::string body = R"({"inputs":[{"name":"img","shape":[1,784],"datatype":"FP32","data":[)";
    for (int i = 0; i < 784; ++i) body += i ? ",0.5" : "0.5";
    body += "]}]}";
    const std::string answer = post(port, "/v2/models/mlp/infer", body);
    check(has(answer, "HTTP/1.1 200") && has(answer, "\"name\":\"prediction\"") && has(answer, "\"shape\":[1,10]"), "infer over the socket");
    const std::string m = server.metrics_text();
    check(has(m, "oar_inference_requests_total{model=\"mlp\",version=\"1\",status=\"success\"} 1\n"), "metrics_text() counts that request");
    check(has(m, "oar_http_requests_total{code=\"404\"} 2\n"), "metrics_text() counts the 404s answered");
    server.stop();
    check(round_trip(port, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n").empty(), "after stop() nothing answers");
  }
  {
    // Several HTTP threads: each connection then runs on a strand of its own. Clients on 8 threads at once, every
    // answer whole and right.
    oar::serve::Server server(repo, {.port = 0, .http_threads = 3});
    server.start();
    const uint16_t port = server.port();
    std::string body = R"({"inputs":[{"name":"img","shape":[1,784],"datatype":"FP32","data":[)";
    for (int i = 0; i < 784; ++i) body += i ? ",0.25" : "0.25";
    body += "]}]}";
    const std::string first = post(port, "/v2/models/mlp/infer", body);
    const std::string expect = first.substr(first.find("\r\n\r\n"));
    std::vector<int> right(8, 0);
    std::vector<std::thread> clients;
    for (int t = 0; t < 8; ++t)
      clients.emplace_back([&, t] {
        for (int i = 0; i < 25; ++i) {
          const std::string a = post(port, "/v2/models/mlp/infer", body);
          right[size_t(t)] += has(a, "HTTP/1.1 200") && a.substr(a.find("\r\n\r\n")) == expect;
        }
      });
    for (auto& c : clients) c.join();
    int total = 0;
    for (int r : right) total += r;
    check(has(first, "HTTP/1.1 200") && total == 200, "3 HTTP threads, 8 clients at once: " + std::to_string(total) + " of 200 answers equal the first");
    server.stop();
  }
  {
    bool named = false;
    try {
      oar::serve::Server bad(fs::path(argv[1]) / "no_such_repo", {.port = 0});
      bad.start();
    } catch (const std::exception& e) {
      named = has(e.what(), "no_such_repo");
    }
    check(named, "start() on a missing repository: an error naming it");
  }
  std::printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
}
