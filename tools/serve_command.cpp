// tools/serve_command.cpp: `oar serve REPO [options]`: oar::serve::Server on a model repository until SIGINT or
// SIGTERM (docs/serving.md).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "oar/core/error.hpp"
#include "oar/serve/server.hpp"

namespace oar_cli {

constexpr const char* kServeUsage =
    "usage: oar serve REPO [options]\n"
    "\n"
    "Serves the models of REPO (REPO/<model>/<version>/, inference models) over HTTP with the KServe v2 protocol.\n"
    "\n"
    "  --host ADDR            address to listen on (127.0.0.1; 0.0.0.0 for every interface)\n"
    "  --port N               port (8000; 0: any free port)\n"
    "  --port-file FILE       write the port to FILE once listening\n"
    "  --api-key KEY          require `Authorization: Bearer KEY` on every endpoint but /v2/health/*\n"
    "  --http-threads N       threads for the connections (1)\n"
    "  --max-body-bytes N     largest request body (67108864)\n"
    "  --max-header-bytes N   largest request header (16384)\n"
    "  --max-elements N       largest input tensor, in elements (67108864)\n"
    "  --idle-timeout S       close a keep-alive connection idle for S seconds, or sending its headers that long (60)\n"
    "  --request-timeout S    close a connection taking S seconds to send a request body or read an answer (30)\n"
    "  --log                  a line per request on stderr\n";

int serve_command(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kServeUsage;
    return args.empty() ? 2 : 0;
  }
  oar::serve::ServerOptions o;
  std::string repo, port_file;
  auto number = [&](size_t& i, const std::string& flag) -> double {
    if (i + 1 >= args.size()) throw oar::Error("serve: " + flag + " needs a value");
    const std::string& v = args[++i];
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || x < 0) throw oar::Error("serve: " + flag + " takes a non-negative number, got '" + v + "'");
    return x;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--host" && i + 1 < args.size()) o.host = args[++i];
    else if (a == "--port") {
      const double p = number(i, a);
      if (p > 65535 || p != double(int(p))) throw oar::Error("serve: --port must be 0 .. 65535");
      o.port = uint16_t(p);
    } else if (a == "--port-file" && i + 1 < args.size()) port_file = args[++i];
    else if (a == "--api-key" && i + 1 < args.size()) o.api_key = args[++i];
    else if (a == "--http-threads") o.http_threads = std::max(1, int(number(i, a)));
    else if (a == "--max-body-bytes") o.limits.max_body_bytes = size_t(number(i, a));
    else if (a == "--max-header-bytes") o.limits.max_header_bytes = size_t(number(i, a));
    else if (a == "--max-elements") o.limits.max_elements = int64_t(number(i, a));
    else if (a == "--idle-timeout") o.limits.idle_timeout_s = number(i, a);
    else if (a == "--request-timeout") o.limits.request_timeout_s = number(i, a);
    else if (a == "--log") o.log_requests = true;
    else if (!a.empty() && a[0] == '-') throw oar::Error("serve: unknown option '" + a + "' (oar serve --help)");
    else if (repo.empty()) repo = a;
    else throw oar::Error("serve: one repository only, got '" + repo + "' and '" + a + "'");
  }
  if (repo.empty()) throw oar::Error("serve: needs a model repository directory (oar serve --help)");
  // SIGINT and SIGTERM are taken by sigwait below, on this thread: blocked before any server thread starts,
  // so that none of them is interrupted instead.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  oar::serve::Server server(repo, o);
  server.start();
  std::printf("oar serve: listening on http://%s:%u\n", o.host.c_str(), unsigned(server.port()));
  for (auto& s : server.index()) std::printf("oar serve: model '%s' version %lld %s\n", s.name.c_str(), (long long)s.version, s.state.c_str());
  std::fflush(stdout);
  if (!port_file.empty()) {
    {
      std::ofstream f(port_file + ".tmp");
      f << server.port() << "\n";
      if (!f) throw oar::Error("serve: cannot write '" + port_file + ".tmp'");
    }
    if (std::rename((port_file + ".tmp").c_str(), port_file.c_str()) != 0) throw oar::Error("serve: cannot rename to '" + port_file + "'");
  }
  int sig = 0;
  sigwait(&sigs, &sig);
  std::printf("oar serve: stopping (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  server.stop();
  return 0;
}

}  // namespace oar_cli
