// tests/io/durability.cpp: nothing lost (docs/reliability.md). An inference model's directory is replaced whole
// and keeps the user's files; a kill -9 at random moments of save_inference_model, save_combined and
// save_tensor leaves the old or the new data, never a mix and never a checksum error; a full disk (a 64 KiB
// tmpfs) and a read-only target are oar::Errors naming the path, and the previous model loads bit for bit.
#include "pch.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "oar/io/durable-inl.hpp"
#include "support/op_check.hpp"
#include "support/temp_dir.hpp"

using namespace oar;
using oar::test::error_of;
namespace fs = std::filesystem;

namespace {

fs::path dur_dir(const std::string& name) { return oar::test::fresh_dir("io_dur", name); }

std::string slurp(const fs::path& p) { return oar::detail::read_file(p); }
void spit(const fs::path& p, std::string_view s) { std::ofstream(p, std::ios::binary | std::ios::trunc).write(s.data(), std::streamsize(s.size())); }

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}


Model mlp(int64_t in, int64_t hidden) {
  Tape t;
  Var x = data("x", f32, {-1, in});
  Var y = fc(fc(x, hidden).act(relu), 4).name("y");
  return Model(t.program(y));
}

float pattern_value(int k, int64_t i) { return float(k) + float(i % 1000) * 1e-3f; }

/// Sets every parameter to pattern `k`: all values differ between patterns, so a mix of two saves shows.
void set_pattern(const Model& m, int k) {
  for (auto& n : m.parameter_names()) {
    LoDTensor& p = m.parameter(n);
    for (int64_t i = 0; i < p.numel(); ++i) p.data<float>()[i] = pattern_value(k, i);
  }
}

LoDTensor pattern_tensor(int k, int64_t n) {
  Tensor t(Shape{n}, f32);
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = pattern_value(k, i);
  return LoDTensor(t);
}

/// The pattern every tensor holds, bit for bit: 0 or 1, or -1 for a mix or other values.
int pattern_of(const std::vector<LoDTensor>& ts) {
  int found = -2;
  for (const LoDTensor& t : ts) {
    int k = -1;
    for (int c : {0, 1}) {
      bool all = true;
      for (int64_t i = 0; i < t.numel() && all; ++i) all = t.data<float>()[i] == pattern_value(c, i);
      if (all) k = c;
    }
    if (k < 0 || (found != -2 && found != k)) return -1;
    found = k;
  }
  return found;
}
int pattern_of(const std::vector<std::pair<std::string, LoDTensor>>& params) {
  std::vector<LoDTensor> ts;
  for (auto& [n, t] : params) ts.push_back(t);
  return pattern_of(ts);
}

/// A tmpfs mounted for the test's lifetime (needs CAP_SYS_ADMIN); `why` says what failed when it is not.
struct TmpfsMount {
  fs::path at;
  bool ok = false;
  std::string why;
  TmpfsMount(fs::path where, const char* options) : at(std::move(where)) {
    fs::create_directories(at);
    ok = ::mount("tmpfs", at.c_str(), "tmpfs", 0, options) == 0;
    if (!ok) why = std::strerror(errno);
  }
  bool make_read_only() { return ::mount("tmpfs", at.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr) == 0; }
  ~TmpfsMount() {
    if (ok) ::umount2(at.c_str(), MNT_DETACH);
  }
};

/// Forks a child that runs `save` in a loop until it is killed; waits until the child has finished `after_saves`
/// saves (it reports each on a pipe), then `ms` milliseconds more, kills it and reaps it.
template <class F>
void kill_during(F&& save, int after_saves, int ms) {
  int done[2];
  REQUIRE(::pipe(done) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(done[0]);
    try {
      for (int k = 1;; k ^= 1) {
        save(k);
        if (::write(done[1], "s", 1) != 1) break;
      }
    } catch (...) {
    }
    ::_exit(3);  // never back into doctest: the parent reports
  }
  ::close(done[1]);
  char c;
  for (int i = 0; i < after_saves; ++i) REQUIRE(::read(done[0], &c, 1) == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(done[0]);
  CHECK(WIFSIGNALED(status));  // still saving when killed, not stopped by an error
}

/// The id of a process that has exited.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

/// Removes a test's directory at the end of its scope (declared before a mount inside it, so after the unmount).
struct RemoveAtEnd {
  fs::path p;
  ~RemoveAtEnd() {
    std::error_code ec;
    fs::remove_all(p, ec);
  }
};

struct ForceRenameAside {
  ForceRenameAside() { io::detail::no_rename_exchange = true; }
  ~ForceRenameAside() { io::detail::no_rename_exchange = false; }
};

}  // namespace

TEST_CASE("durability: save_inference_model replaces the model directory whole, keeps the user's files and leaves nothing beside it") {
  const fs::path base = dur_dir("swap"), dir = base / "model";
  Model m = mlp(8, 16);
  set_pattern(m, 0);
  m.save_inference(dir, {}, {}, /*combined=*/false);  // one file per parameter, each with its sidecar
  const io::InferenceModel first = io::load_inference_model(dir);
  REQUIRE(first.params.size() == 4);
  CHECK(pattern_of(first.params) == 0);
  for (auto& [n, t] : first.params) CHECK((fs::exists(dir / n) && fs::exists(dir / (n + ".oarsum"))));
  CHECK(fs::exists(dir / "__model__.oarsum"));
  spit(dir / "README.txt", "mine");
  fs::create_directories(dir / "notes");
  spit(dir / "notes" / "a.txt", "a");
  spit(dir / "vocab", "words");  // no sidecar and no reserved name: the user's

  set_pattern(m, 1);
  m.save_inference(dir);  // combined now: the per-parameter files were oar's and go
  const io::InferenceModel second = io::load_inference_model(dir);
  CHECK(pattern_of(second.params) == 1);
  for (auto& [n, t] : first.params) CHECK_FALSE(fs::exists(dir / n));
  CHECK(entries(dir) == std::vector<std::string>{"README.txt", "__model__", "__model__.oarsum", "__params__", "__params__.oarsum", "notes", "vocab"});
  CHECK(slurp(dir / "README.txt") == "mine");
  CHECK(slurp(dir / "notes" / "a.txt") == "a");
  CHECK(slurp(dir / "vocab") == "words");
  CHECK(entries(base) == std::vector<std::string>{"model"});
  // Model::save goes the same way, and a trailing '/' names the same directory
  m.save(base / "full" / "");
  m.save(base / "full");
  CHECK(entries(base / "full") == std::vector<std::string>{"__meta__", "__model__", "__params__", "__params__.oarsum", "__startup__"});
  CHECK(entries(base) == std::vector<std::string>{"full", "model"});
  // a file where the directory should be is refused, and left as it is
  spit(base / "file", "x");
  CHECK(error_of([&] { m.save_inference(base / "file"); }).find("cannot save the model directory '" + (base / "file").string() + "': it exists and is not a directory") !=
        std::string::npos);
  CHECK(slurp(base / "file") == "x");
  fs::remove_all(base);
}

TEST_CASE("durability: without RENAME_EXCHANGE the model is renamed aside, and a model a crash left aside is put back by the next load") {
  const fs::path base = dur_dir("aside"), dir = base / "model";
  const ForceRenameAside aside;
  Model m = mlp(8, 16);
  set_pattern(m, 0);
  m.save_inference(dir);
  spit(dir / "README.txt", "mine");
  set_pattern(m, 1);
  m.save_inference(dir);
  CHECK(pattern_of(io::load_inference_model(dir).params) == 1);
  CHECK(entries(base) == std::vector<std::string>{"model"});
  // A kill between the two renames: the model is aside, the complete new one still in staging.
  const pid_t gone = dead_pid();
  fs::rename(dir, base / fmt::format(".model.oar-old.{}", gone));
  fs::create_directories(base / fmt::format(".model.oar-staging.{}", gone));
  spit(base / fmt::format(".model.oar-staging.{}", gone) / "__params__", "half a model");
  CHECK(pattern_of(io::load_inference_model(dir).params) == 1);
  CHECK(slurp(dir / "README.txt") == "mine");
  CHECK(entries(base) == std::vector<std::string>{fmt::format(".model.oar-staging.{}", gone), "model"});
  set_pattern(m, 0);
  m.save_inference(dir);  // a save removes what a killed save left
  CHECK(entries(base) == std::vector<std::string>{"model"});
  CHECK(pattern_of(Model::load_inference(dir).persistables()) == 0);
  // Model::load too
  m.save(base / "full");
  fs::rename(base / "full", base / fmt::format(".full.oar-old.{}", gone));
  CHECK(pattern_of(Model::load(base / "full").persistables()) == 0);
  fs::remove_all(base);
}

TEST_CASE("durability: a kill -9 at random moments of save_inference_model leaves the old model or the new one, never a mix") {
  const fs::path base = dur_dir("kill_model"), dir = base / "model";
  Model m = mlp(256, 512);  // 0.5 MiB of weights
  set_pattern(m, 0);
  m.save_inference(dir);
  spit(dir / "README.txt", "mine");
  std::mt19937 rng(37);
  int seen[2] = {0, 0}, mid_save = 0;
  for (int round = 0; round < 12; ++round) {
    CAPTURE(round);
    const bool rename_aside = round % 3 == 2;  // and the fallback for filesystems without RENAME_EXCHANGE
    kill_during(
        [&](int k) {
          io::detail::no_rename_exchange = rename_aside;
          set_pattern(m, k);
          m.save_inference(dir, {}, {}, /*combined=*/(k + round) % 2 == 0);  // the layout changes too
        },
        round % 4, round == 1 ? 0 : int(rng() % (2 + 6 * round)));  // during the first save, and later
    for (auto& n : entries(base)) mid_save += n.starts_with(".model.oar-");
    int k = -2;
    CHECK_NOTHROW(k = pattern_of(io::load_inference_model(dir).params));
    CHECK((k == 0 || k == 1));
    if (k >= 0) seen[k]++;
    CHECK(slurp(dir / "README.txt") == "mine");
  }
  MESSAGE("after 12 kills the directory held the old model " << seen[0] << " times and the new one " << seen[1] << " times; "
          << mid_save << " kills came in the middle of a save (a staging directory was left)");
  CHECK(seen[0] + seen[1] == 12);
  CHECK(seen[1] > 0);  // round 1 kills right after the first save: the new model
  set_pattern(m, 0);
  m.save_inference(dir);
  CHECK(entries(base) == std::vector<std::string>{"model"});
  CHECK(entries(dir) == std::vector<std::string>{"README.txt", "__model__", "__model__.oarsum", "__params__", "__params__.oarsum"});
  fs::remove_all(base);
}

TEST_CASE("durability: a kill -9 at random moments of save_combined and save_tensor leaves the old file or the new one, each matching its sidecar") {
  const fs::path dir = dur_dir("kill_files");
  const std::vector<std::string> names = {"a", "b", "c"};
  auto tensors = [&](int k) {
    std::vector<std::pair<std::string, LoDTensor>> ts;
    for (auto& n : names) ts.push_back({n, pattern_tensor(k, 100000)});
    return ts;
  };
  io::save_combined(dir / "params", tensors(0));
  io::save_tensor(dir / "w", pattern_tensor(0, 300000));
  std::mt19937 rng(2026);
  int seen[2] = {0, 0}, mid_save = 0;
  for (int round = 0; round < 12; ++round) {
    CAPTURE(round);
    kill_during(
        [&](int k) {
          io::save_combined(dir / "params", tensors(k));
          io::save_tensor(dir / "w", pattern_tensor(k, 300000));
        },
        round % 4, round == 1 ? 0 : int(rng() % (2 + 6 * round)));
    mid_save += slurp(dir / "params.oarsum").find("\nor\n") != std::string::npos || slurp(dir / "w.oarsum").find("\nor\n") != std::string::npos;
    int k = -2, kw = -2;
    CHECK_NOTHROW(k = pattern_of(io::load_combined(dir / "params", names)));
    CHECK_NOTHROW(kw = pattern_of({io::load_tensor(dir / "w")}));
    CHECK((k == 0 || k == 1));
    CHECK((kw == 0 || kw == 1));
    if (k >= 0) seen[k]++;
  }
  MESSAGE("after 12 kills the combined file held the old tensors " << seen[0] << " times and the new ones " << seen[1] << " times; "
          << mid_save << " kills left a sidecar listing the old checksums and the new");
  CHECK(seen[1] > 0);
  io::save_combined(dir / "params", tensors(0));
  io::save_tensor(dir / "w", pattern_tensor(0, 300000));
  CHECK(entries(dir) == std::vector<std::string>{"params", "params.oarsum", "w", "w.oarsum"});  // the killed saves' temp files are gone
  fs::remove_all(dir);
}

TEST_CASE("durability: a full disk (ENOSPC) is an oar::Error naming the path, and the previous model and file load bit for bit") {
  const fs::path base = dur_dir("enospc");
  const RemoveAtEnd cleanup{base};
  TmpfsMount disk(base / "disk", "size=64k");
  if (!disk.ok) {
    MESSAGE("skipped: a 64 KiB tmpfs could not be mounted (" << disk.why << "; it needs root)");
    return;
  }
  const fs::path dir = disk.at / "model";
  Model small = mlp(8, 16), big = mlp(64, 512);  // big: 130 KiB of weights, more than the disk holds
  set_pattern(small, 0);
  set_pattern(big, 1);
  small.save_inference(dir);
  const std::string params = slurp(dir / "__params__"), program = slurp(dir / "__model__");
  const std::string e = error_of([&] { big.save_inference(dir); });
  CAPTURE(e);
  test::check_contains(e, {"cannot save the model directory '" + dir.string() + "'", "No space left on device",
                           "the previous model there is untouched"});
  CHECK(slurp(dir / "__params__") == params);
  CHECK(slurp(dir / "__model__") == program);
  CHECK(pattern_of(io::load_inference_model(dir).params) == 0);
  CHECK(entries(disk.at) == std::vector<std::string>{"model"});  // the staging directory is gone

  const fs::path p = disk.at / "params";
  io::save_combined(p, small.persistables());
  const std::string before = slurp(p);
  const std::string ef = error_of([&] { io::save_combined(p, big.persistables()); });
  CAPTURE(ef);
  test::check_contains(ef, {"cannot save '" + p.string() + "'", "No space left on device", "the previous file is untouched"});
  CHECK(slurp(p) == before);
  std::vector<std::string> names;
  for (auto& [n, t] : small.persistables()) names.push_back(n);
  CHECK(pattern_of(io::load_combined(p, names)) == 0);
  CHECK(entries(disk.at) == std::vector<std::string>{"model", "params", "params.oarsum"});
  // a new file that does not fit: nothing is written
  const std::string en = error_of([&] { io::save_tensor(disk.at / "new", big.parameter(big.parameter_names()[0])); });
  CHECK(en.find("No space left on device; nothing was written") != std::string::npos);
  CHECK_FALSE(fs::exists(disk.at / "new"));
}

TEST_CASE("durability: a read-only target is an oar::Error naming the path, and the previous model is untouched") {
  const fs::path base = dur_dir("readonly");
  const RemoveAtEnd cleanup{base};
  Model m = mlp(8, 16);
  set_pattern(m, 0);
  // chmod 0555: refuses anyone but root (CAP_DAC_OVERRIDE writes anyway: then a read-only mount below)
  {
    const fs::path parent = base / "chmod", dir = parent / "model";
    m.save_inference(dir);
    const std::string params = slurp(dir / "__params__");
    const auto ro = fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                    fs::perms::others_exec;
    fs::permissions(parent, ro);
    fs::permissions(dir, ro);
    const int probe = ::open((dir / ".probe").c_str(), O_WRONLY | O_CREAT, 0644);
    if (probe >= 0) {
      ::close(probe);
      fs::remove(dir / ".probe");
      MESSAGE("chmod 0555 does not stop this process (root): the read-only case runs on a read-only tmpfs below");
    } else {
      set_pattern(m, 1);
      const std::string e = error_of([&] { m.save_inference(dir); });
      CAPTURE(e);
      test::check_contains(e, {"cannot save the model directory '" + dir.string() + "'", "Permission denied",
                               "the previous model there is untouched"});
      CHECK(slurp(dir / "__params__") == params);
      CHECK(pattern_of(io::load_inference_model(dir).params) == 0);
      CHECK(error_of([&] { io::save_tensor(dir / "w", pattern_tensor(1, 4)); }).find("Permission denied; nothing was written") != std::string::npos);
      set_pattern(m, 0);
    }
    fs::permissions(parent, fs::perms::owner_all);
    fs::permissions(dir, fs::perms::owner_all);
  }
  TmpfsMount disk(base / "disk", "size=1m");
  if (!disk.ok) {
    MESSAGE("skipped the read-only mount: a tmpfs could not be mounted (" << disk.why << "; it needs root)");
    return;
  }
  const fs::path dir = disk.at / "model", w = disk.at / "w";
  m.save_inference(dir);
  io::save_tensor(w, pattern_tensor(0, 64));
  const std::string params = slurp(dir / "__params__");
  REQUIRE(disk.make_read_only());
  set_pattern(m, 1);
  const std::string e = error_of([&] { m.save_inference(dir); });
  CAPTURE(e);
  test::check_contains(e, {"cannot save the model directory '" + dir.string() + "'", "Read-only file system",
                           "the previous model there is untouched"});
  CHECK(slurp(dir / "__params__") == params);
  CHECK(pattern_of(io::load_inference_model(dir).params) == 0);
  const std::string ew = error_of([&] { io::save_tensor(w, pattern_tensor(1, 64)); });
  CAPTURE(ew);
  CHECK(ew.find("cannot save '" + w.string() + "'") != std::string::npos);
  CHECK(ew.find("Read-only file system; the previous file is untouched") != std::string::npos);
  CHECK(pattern_of({io::load_tensor(w)}) == 0);
  // a new model directory beside them: nothing was written
  CHECK(error_of([&] { m.save_inference(disk.at / "other"); }).find("Read-only file system; nothing was written") != std::string::npos);
}
