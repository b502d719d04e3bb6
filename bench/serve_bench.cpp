// bench/serve_bench.cpp: oar_serve_bench: the inference server under wrk (Debian's `wrk`) at 1, 16, 64 and 256
// keep-alive connections, batch-1 requests in the binary tensor format tritonclient sends, for the book MLP and
// the book conv net, with and without dynamic batching. Next to each: (a) the same model in-process through an
// Evaluator at the batch size the batcher formed (rows/s), (b) the HTTP stack alone: an empty handler of the same
// server answering the same requests (requests/s). The figure of merit is requests/s over the lower of the two.
// Then latency below saturation: the batched models at 64 connections paced to fractions of the rate they
// reached, each connection waiting a random (exponential) time before its next request, against the bound
// window + 2 x one batch's compute time.
// Usage: oar_serve_bench [--seconds S (3)] [--window-us T (500)] [--max-batch N (16)] [--evaluators N (1)] [--conns 1,16,64,256]
//                        [--paced 0.25,0.5 (fractions of the closed-loop rate; empty: none)]
#include <oar/oar.hpp>
#include <oar/serve/server.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Net {
  std::string name, input, output;
  std::vector<int64_t> shape;  // one row's
};

void save_mlp(const fs::path& dir) {
  oar::Tape tape;
  auto img = oar::data("img", oar::f32, {-1, 784});
  auto prediction = oar::fc(oar::fc(img, 200).act(oar::relu), 10).act(oar::softmax).name("prediction");
  oar::Model m(tape.program({prediction}), 1);
  m.save_inference(dir, {img}, {prediction});
}

void save_conv(const fs::path& dir) {
  oar::Tape tape;
  auto img = oar::data("img", oar::f32, {-1, 1, 28, 28});
  auto conv_pool = [](const oar::Var& x, int filters) {
    return oar::pool2d(oar::conv2d(x, filters, 5).act(oar::relu), 2).type(oar::PoolType::max).stride(2);
  };
  auto prediction = oar::fc(conv_pool(oar::batch_norm(conv_pool(img, 20)), 50), 10).act(oar::softmax).name("prediction");
  oar::Model m(tape.program({prediction}), 3);
  m.save_inference(dir, {img}, {prediction});
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

/// wrk's latency in ms from "12.34ms" / "1.2s" / "800us".
double to_ms(const std::string& v) {
  const double x = std::atof(v.c_str());
  if (v.ends_with("us")) return x / 1000;
  if (v.ends_with("ms")) return x;
  if (v.ends_with("s")) return x * 1000;
  if (v.ends_with("m")) return x * 60000;
  return x;
}

struct WrkResult {
  double rps = 0, p50_ms = 0, p99_ms = 0, max_ms = 0;
  int64_t requests = 0, errors = 0;
};

/// `script` (a request's wrk script) with a `delay()` that makes `conns` connections send about `rps` requests/s
/// in all: each waits an exponentially distributed time (mean conns / rps) before its next request, so that
/// arrivals are close to a Poisson stream while the server keeps up. wrk times a request from its write, not
/// the wait before it.
fs::path paced_script(const fs::path& script, int conns, double rps) {
  const fs::path out = script.parent_path() / fmt::format("{}_{}_{:.0f}.lua", script.stem().string(), conns, rps);
  std::ifstream in(script);
  std::stringstream body;
  body << in.rdbuf();
  std::ofstream(out) << body.str() << fmt::format("local mean_ms = {}\nmath.randomseed(7)\nfunction delay()\n  return -math.log(1 - math.random()) * mean_ms\nend\n",
                                                  1000.0 * conns / rps);
  return out;
}

WrkResult wrk(const std::string& url, int conns, double seconds, const fs::path& script) {
  const std::string out = run(fmt::format("wrk -t1 -c{} -d{}s --latency --timeout 10s -s {} {} 2>&1", conns, seconds, script.string(), url));
  WrkResult r;
  std::smatch m;
  if (std::regex_search(out, m, std::regex(R"(Requests/sec:\s+([0-9.]+))"))) r.rps = std::atof(m[1].str().c_str());
  if (std::regex_search(out, m, std::regex(R"(\s50%\s+([0-9.]+[a-z]+))"))) r.p50_ms = to_ms(m[1].str());
  if (std::regex_search(out, m, std::regex(R"(\s99%\s+([0-9.]+[a-z]+))"))) r.p99_ms = to_ms(m[1].str());
  if (std::regex_search(out, m, std::regex(R"(Latency\s+\S+\s+\S+\s+([0-9.]+[a-z]+))"))) r.max_ms = to_ms(m[1].str());
  if (std::regex_search(out, m, std::regex(R"(([0-9]+) requests in)"))) r.requests = std::atoll(m[1].str().c_str());
  if (std::regex_search(out, m, std::regex(R"(Non-2xx or 3xx responses:\s+([0-9]+))"))) r.errors += std::atoll(m[1].str().c_str());
  if (std::regex_search(out, m, std::regex(R"(Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+))")))
    for (int i = 1; i <= 4; ++i) r.errors += std::atoll(m[i].str().c_str());
  if (r.rps == 0) std::fprintf(stderr, "wrk said:\n%s\n", out.c_str());
  return r;
}

/// A metric's value from the exposition text (the first line starting with `prefix`).
double metric(const std::string& text, const std::string& prefix) {
  const size_t at = text.find("\n" + prefix);
  if (at == std::string::npos) return 0;
  const size_t sp = text.find(' ', at + 1 + prefix.size());
  return std::atof(text.c_str() + sp + 1);
}

/// Rows/s of `dir`'s model through one Evaluator at batch `b`, for about `seconds`.
double evaluator_rows_per_s(const fs::path& dir, const Net& net, int64_t b, double seconds) {
  oar::Model m = oar::Model::load_inference(dir);
  oar::Evaluator ev(m);
  std::vector<int64_t> d{b};
  d.insert(d.end(), net.shape.begin(), net.shape.end());
  oar::Tensor x{oar::Shape(d), oar::f32};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0, 1);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
  oar::FeedMap feeds{{m.feeds()[0], oar::LoDTensor(x)}};
  ev.forward(feeds);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  int64_t calls = 0;
  while (std::chrono::duration<double>(clock::now() - t0).count() < seconds) {
    ev.forward(feeds);
    ++calls;
  }
  return double(calls * b) / std::chrono::duration<double>(clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) try {
  double seconds = 3;
  int64_t window_us = 500, max_batch = 16, evaluators = 1;
  std::vector<int> conns{1, 16, 64, 256};
  std::vector<double> paced{0.25, 0.5};
  auto list = [](const char* text, auto& into) {
    into.clear();
    std::stringstream ss(text);
    for (std::string c; std::getline(ss, c, ',');)
      if (!c.empty()) into.push_back(std::atof(c.c_str()));
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (a == "--window-us" && i + 1 < argc) window_us = std::atoll(argv[++i]);
    else if (a == "--max-batch" && i + 1 < argc) max_batch = std::atoll(argv[++i]);
    else if (a == "--evaluators" && i + 1 < argc) evaluators = std::atoll(argv[++i]);
    else if (a == "--conns" && i + 1 < argc) list(argv[++i], conns);
    else if (a == "--paced" && i + 1 < argc) list(argv[++i], paced);
    else {
      std::printf("usage: oar_serve_bench [--seconds S (3)] [--window-us T (500)] [--max-batch N (16)] [--evaluators N (1)] [--conns 1,16,64,256] "
                  "[--paced 0.25,0.5]\n");
      return 2;
    }
  }
  if (run("command -v wrk").empty()) {
    std::printf("oar_serve_bench: needs wrk (apt-get install wrk)\n");
    return 2;
  }
  oar::set_num_threads(1);
  const fs::path work = fs::temp_directory_path() / fmt::format("oar_serve_bench_{}", ::getpid());
  fs::create_directories(work);
  const std::vector<Net> nets{{"mlp", "img", "prediction", {784}}, {"conv", "img", "prediction", {1, 28, 28}}};
  for (auto& n : nets) {
    for (bool batched : {false, true}) {
      const fs::path dir = work / "repo" / (n.name + (batched ? "_batched" : ""));
      if (n.name == "mlp") save_mlp(dir / "1");
      else save_conv(dir / "1");
      if (batched)
        std::ofstream(dir / "config.json") << fmt::format(R"({{"evaluators": {}, "dynamic_batching": {{"max_batch_size": {}, "window_us": {}}}}})", evaluators,
                                                          max_batch, window_us);
      else
        std::ofstream(dir / "config.json") << fmt::format(R"({{"evaluators": {}}})", evaluators);
    }
    // A batch-1 request in the binary tensor format, and the wrk script that sends it.
    int64_t numel = 1;
    for (auto d : n.shape) numel *= d;
    std::vector<int64_t> shape{1};
    shape.insert(shape.end(), n.shape.begin(), n.shape.end());
    const std::string head = fmt::format(
        R"({{"inputs":[{{"name":"{}","shape":[{}],"datatype":"FP32","parameters":{{"binary_data_size":{}}}}}],"outputs":[{{"name":"{}","parameters":{{"binary_data":true}}}}]}})",
        n.input, fmt::join(shape, ","), numel * 4, n.output);
    std::vector<float> x(size_t(numel), 0.5f);
    std::ofstream(work / (n.name + ".body"), std::ios::binary) << head << std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4);
    std::ofstream(work / (n.name + ".lua")) << fmt::format(
        "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/octet-stream\"\nwrk.headers[\"Inference-Header-Content-Length\"] = \"{}\"\n"
        "local f = io.open(\"{}\", \"rb\")\nwrk.body = f:read(\"*a\")\nf:close()\n",
        head.size(), (work / (n.name + ".body")).string());
  }

  oar::serve::Server server(work / "repo", {.port = 0});
  server.route("POST", "/empty", [](const oar::serve::HttpRequest&) { return oar::serve::HttpResponse{200, "application/json", "{}"}; });
  server.start();
  const std::string base = fmt::format("http://127.0.0.1:{}", server.port());
  std::printf("# oar_serve_bench: %s, %g s per point, dynamic batching max %lld rows, window %lld us; wrk -t1; 1 HTTP thread, %lld evaluator(s) per model\n",
              base.c_str(), seconds, (long long)max_batch, (long long)window_us, (long long)evaluators);
  std::printf("| model | batching | connections | requests/s | p50 ms | p99 ms | errors | mean batch | (a) Evaluator rows/s at that batch | (b) empty handler requests/s | "
              "requests/s / min(a, b) |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::map<std::pair<std::string, int64_t>, double> eval_cache;
  std::map<std::string, double> closed_rps_at_64;  // per batched model
  for (auto& n : nets) {
    for (bool batched : {false, true}) {
      const std::string model = n.name + (batched ? "_batched" : "");
      for (int c : conns) {
        const std::string before = server.metrics_text();
        const std::string labels = fmt::format("{{model=\"{}\",version=\"1\"}}", model);
        const std::string sum_key = "oar_inference_batch_size_sum" + labels, count_key = "oar_inference_batch_size_count" + labels;
        WrkResult r = wrk(base + "/v2/models/" + model + "/infer", c, seconds, work / (n.name + ".lua"));
        const std::string after = server.metrics_text();
        const double rows = metric(after, sum_key) - metric(before, sum_key);
        const double batches = metric(after, count_key) - metric(before, count_key);
        const double mean_batch = batches > 0 ? rows / batches : 1;
        const int64_t b = std::max<int64_t>(1, int64_t(std::lround(mean_batch)));
        auto& a = eval_cache[{n.name, b}];
        if (a == 0) a = evaluator_rows_per_s(work / "repo" / n.name / "1", n, b, std::min(seconds, 2.0));
        WrkResult e = wrk(base + "/empty", c, seconds, work / (n.name + ".lua"));
        if (batched && c == 64) closed_rps_at_64[model] = r.rps;
        std::printf("| %s | %s | %d | %.0f | %.2f | %.2f | %lld | %.2f | %.0f | %.0f | %.2f |\n", n.name.c_str(), batched ? fmt::format("{} us", window_us).c_str() : "off",
                    c, r.rps, r.p50_ms, r.p99_ms, (long long)(r.errors + e.errors), mean_batch, a, e.rps, r.rps / std::min(a, e.rps));
        std::fflush(stdout);
      }
    }
  }
  if (!paced.empty() && !closed_rps_at_64.empty()) {
    std::printf("\n# below saturation: 64 connections paced to a fraction of the closed-loop rate above; bound = window + 2 x one batch's compute time "
                "(the mean batch over (a) at that batch)\n");
    std::printf("| model | fraction | target requests/s | requests/s | p50 ms | p99 ms | max ms | errors | mean batch | server mean: queue, total ms | batch compute ms | bound ms | p99 within |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (auto& n : nets) {
      const std::string model = n.name + "_batched";
      if (!closed_rps_at_64.count(model)) continue;
      for (double f : paced) {
        const double target = f * closed_rps_at_64[model];
        const std::string before = server.metrics_text();
        const std::string labels = fmt::format("{{model=\"{}\",version=\"1\"}}", model);
        const std::string sum_key = "oar_inference_batch_size_sum" + labels, count_key = "oar_inference_batch_size_count" + labels;
        WrkResult r = wrk(base + "/v2/models/" + model + "/infer", 64, seconds, paced_script(work / (n.name + ".lua"), 64, target));
        const std::string after = server.metrics_text();
        const double batches = metric(after, count_key) - metric(before, count_key);
        const double mean_batch = batches > 0 ? (metric(after, sum_key) - metric(before, sum_key)) / batches : 1;
        const int64_t b = std::max<int64_t>(1, int64_t(std::lround(mean_batch)));
        // The server's own view: mean time from parsed request to batch start, and to the answer handed back.
        auto mean_ms = [&](const char* h) {
          const std::string sum = std::string(h) + "_sum" + labels, count = std::string(h) + "_count" + labels;
          const double k = metric(after, count) - metric(before, count);
          return k > 0 ? 1000 * (metric(after, sum) - metric(before, sum)) / k : 0.0;
        };
        const double queue_ms = mean_ms("oar_inference_queue_seconds"), total_ms = mean_ms("oar_inference_request_seconds");
        auto& a = eval_cache[{n.name, b}];
        if (a == 0) a = evaluator_rows_per_s(work / "repo" / n.name / "1", n, b, std::min(seconds, 2.0));
        const double compute_ms = 1000.0 * double(b) / a, bound_ms = double(window_us) / 1000 + 2 * compute_ms;
        std::printf("| %s | %.2f | %.0f | %.0f | %.2f | %.2f | %.2f | %lld | %.2f | %.3f, %.3f | %.3f | %.3f | %s |\n", n.name.c_str(), f, target, r.rps, r.p50_ms, r.p99_ms,
                    r.max_ms, (long long)r.errors, mean_batch, queue_ms, total_ms, compute_ms, bound_ms, r.p99_ms <= bound_ms ? "yes" : "no");
        std::fflush(stdout);
      }
    }
  }
  server.stop();
  fs::remove_all(work);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "oar_serve_bench: %s\n", e.what());
  return 1;
}
