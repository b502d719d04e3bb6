// oar/io/durable-inl.hpp: saving so that nothing is lost, for the implementation files that save (tensor_file-inl,
// inference_model-inl, api/model-inl); no public header. Three things:
//
// Checksum sidecars. Fluid's tensor and program files carry no checksum, and Fluid's readers must still read
// oar's files, so the checksums go into a file beside each one, `<file>.oarsum`, which Fluid never opens:
//     oarsum 1 crc32                  the version line
//     fc_0.b_0 16 1a2b3c4d            one line per tensor in file order: name, byte length, crc32 (hex)
//     fc_0.w_0 4096 deadbeef
//     or                              a save in progress: the data file is the list above or the one below
//     fc_0.b_0 16 5e6f7a8b
//     fc_0.w_0 4096 0badf00d
// Names are %-escaped (space, control bytes, '%'). A load accepts a data file that matches any one list, and a
// data file without a sidecar (written by Fluid) loads unchecked.
//
// Crash safety of one file. A kill at any moment must never leave a data file and a sidecar that disagree:
//   1. the new data goes to a temp file beside the target, fsynced;
//   2. the sidecar is replaced (temp, fsync, rename) by one listing the old checksums *and* the new;
//   3. the temp file is renamed over the target (the data switches in one step), the directory fsynced;
//   4. the sidecar is replaced by one listing the new checksums only.
// Between 2 and 4 the sidecar accepts either data file, so every moment has a consistent pair. The old
// checksums come from the old sidecar, or, for an old file without one, from the old file itself.
//
// Directories (an inference model's `__model__` and `__params__`, Model::save's four files). Two renames cannot
// switch two files at once, so the whole new directory is written into `.<name>.oar-staging.<pid>-<n>` beside the
// target and swapped in with renameat2(RENAME_EXCHANGE), one atomic step; the old directory, now at the staging
// name, is then removed. A filesystem that refuses the exchange (EINVAL) gets two renames: the target aside to
// `.<name>.oar-old.<pid>-<n>`, then the staging directory to the target; a crash between them leaves no target, and
// recover_directory (called by every loader and saver) renames the old one back. Files in the target that oar
// did not write (a README, a user's sub-directory) are hard-linked (else copied) into the new directory before
// the swap: oar removes only the files it wrote (the reserved `__*__` names, `*.oarsum` and the data files
// they checksum, its own temp files).
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc >= 2.28, _GNU_SOURCE)
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "oar/core/error.hpp"
#include "oar/core/file.hpp"

namespace oar::io::detail {

/// For tests: behave as on a filesystem that refuses RENAME_EXCHANGE, so that the rename-aside path runs.
inline std::atomic<bool> no_rename_exchange{false};

/// The names oar writes into a model directory; the only ones (with the sidecars and the data files they
/// checksum) that a save may remove from it.
inline const std::vector<std::string>& model_file_names() {
  static const std::vector<std::string> names = {"__model__", "__params__", "__startup__", "__meta__"};
  return names;
}

inline std::filesystem::path sum_path(const std::filesystem::path& file) {
  return file.parent_path() / (file.filename().string() + ".oarsum");
}

/// zlib's crc32, not the checkpoint's FNV-1a: FNV-1a is one multiply per byte in a dependency chain (about
/// 0.8 GB/s on this project's CI machine), zlib's crc32 works on several words at a time (about 3.6 GB/s on the
/// same 256 MiB buffer), and every load of a model checksums all of its parameters.
inline uint32_t crc32_of(std::string_view s) {
  return uint32_t(crc32_z(crc32_z(0L, nullptr, 0), reinterpret_cast<const Bytef*>(s.data()), s.size()));
}

struct SumEntry {
  std::string name;
  uint64_t bytes = 0;
  uint32_t crc = 0;
  bool operator==(const SumEntry&) const = default;
};
using SumList = std::vector<SumEntry>;

inline uint64_t total_bytes(const SumList& l) {
  uint64_t n = 0;
  for (auto& e : l) n += e.bytes;
  return n;
}

inline std::string sum_escape(std::string_view name) {
  if (name.empty()) return "%";
  std::string out;
  for (unsigned char c : name) {
    if (c <= 0x20 || c == '%' || c == 0x7f) out += fmt::format("%{:02X}", c);
    else out.push_back(char(c));
  }
  return out;
}

inline std::string sum_text(const std::vector<SumList>& lists) {
  std::string s = "oarsum 1 crc32\n";
  for (size_t i = 0; i < lists.size(); ++i) {
    if (i > 0) s += "or\n";
    for (auto& e : lists[i]) s += fmt::format("{} {} {:08x}\n", sum_escape(e.name), e.bytes, e.crc);
  }
  return s;
}

/// The lists of a sidecar's text; oar::Error naming `where` when the text is not a sidecar's.
inline std::vector<SumList> parse_sum(std::string_view text, const std::string& where) {
  auto bad = [&](size_t line, std::string_view why) {
    return Error(fmt::format("checksum file '{}' is damaged: line {} {}", where, line, why));
  };
  if (!text.starts_with("oarsum "))
    throw Error(fmt::format("'{}' is not an oar checksum file: it does not start with 'oarsum'", where));
  if (!text.starts_with("oarsum 1 crc32\n"))
    throw Error(fmt::format("checksum file '{}' has an unknown version or checksum: '{}' (this oar reads 'oarsum 1 crc32')", where,
                            text.substr(0, std::min(text.find('\n'), size_t(40)))));
  if (!text.ends_with('\n')) throw bad(size_t(std::count(text.begin(), text.end(), '\n')) + 1, "is cut short");
  std::vector<SumList> lists(1);
  size_t at = text.find('\n') + 1, line = 1;
  while (at < text.size()) {
    ++line;
    const size_t nl = text.find('\n', at);
    const std::string_view l = text.substr(at, nl - at);
    at = nl + 1;
    if (l == "or") {
      lists.emplace_back();
      continue;
    }
    const size_t s1 = l.find(' '), s2 = s1 == l.npos ? l.npos : l.find(' ', s1 + 1);
    if (s2 == l.npos || l.find(' ', s2 + 1) != l.npos) throw bad(line, "is not 'name bytes crc32'");
    SumEntry e;
    const std::string_view n = l.substr(0, s1), bytes = l.substr(s1 + 1, s2 - s1 - 1), crc = l.substr(s2 + 1);
    for (size_t i = 0; i < n.size(); ++i) {
      if (n[i] != '%') {
        e.name.push_back(n[i]);
        continue;
      }
      if (n == "%") break;  // the empty name
      if (i + 2 >= n.size()) throw bad(line, "has a cut-short %-escape in its name");
      char* end = nullptr;
      const std::string hex(n.substr(i + 1, 2));
      const long c = std::strtol(hex.c_str(), &end, 16);
      if (hex.size() != 2 || *end != 0) throw bad(line, "has a bad %-escape in its name");
      e.name.push_back(char(c));
      i += 2;
    }
    char* end = nullptr;
    const std::string b(bytes), c(crc);
    e.bytes = std::strtoull(b.c_str(), &end, 10);
    if (b.empty() || b[0] == '-' || *end != 0) throw bad(line, "has a byte length that is not a number");
    const unsigned long long v = std::strtoull(c.c_str(), &end, 16);
    if (c.size() != 8 || *end != 0) throw bad(line, "has a crc32 that is not 8 hex digits");
    e.crc = uint32_t(v);
    lists.back().push_back(std::move(e));
  }
  return lists;
}

/// Reads `path` into `out`; false when it does not exist, oar::Error when it exists but cannot be read.
inline bool read_if_exists(const std::filesystem::path& path, std::string& out) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return false;
  out = oar::detail::read_file(path);
  return true;
}

/// Checks `data`, the bytes just read from `file`, against `file`.oarsum when there is one. `kind` names the
/// entries in the error ("tensor", "program"). A file without a sidecar (Fluid's) is not checked.
inline void verify_sum(const std::filesystem::path& file, std::string_view data, std::string_view kind = "tensor") {
  const std::filesystem::path sp = sum_path(file);
  std::string text;
  if (!read_if_exists(sp, text)) return;
  const std::vector<SumList> lists = parse_sum(text, sp.string());
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> crcs;  // the lists of a save in progress share most ranges
  auto crc_at = [&](uint64_t at, uint64_t n) {
    auto [it, fresh] = crcs.try_emplace({at, n}, 0);
    if (fresh) it->second = crc32_of(data.substr(size_t(at), size_t(n)));
    return it->second;
  };
  const SumList* blame = nullptr;  // the newest list of the file's size: the save whose bytes were damaged
  for (const SumList& l : lists) {
    if (total_bytes(l) != data.size()) continue;
    blame = &l;
    uint64_t at = 0;
    bool ok = true;
    for (auto& e : l) {
      if (crc_at(at, e.bytes) != e.crc) {
        ok = false;
        break;
      }
      at += e.bytes;
    }
    if (ok) return;
  }
  if (!blame)
    throw Error(fmt::format("'{}' has {} bytes, but its checksum file '{}' lists {}: the file is damaged (cut short or extended)",
                            file.string(), data.size(), sp.filename().string(), total_bytes(lists.back())));
  uint64_t at = 0;
  for (auto& e : *blame) {
    if (crc_at(at, e.bytes) != e.crc)
      throw Error(fmt::format("'{}': {} '{}' (bytes {}..{}) does not match its checksum in '{}': the file is damaged", file.string(), kind,
                              e.name, at, at + e.bytes, sp.filename().string()));
    at += e.bytes;
  }
}

/// Creates `tmp`, writes `data`, fsyncs and closes it; on failure removes it and throws an oar::Error saying
/// which step failed and errno's text ("No space left on device", "Read-only file system").
inline void write_synced(const std::string& tmp, std::string_view data) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("cannot create '{}': {}", tmp, std::strerror(errno)));
  auto fail = [&](const char* step) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Error(fmt::format("cannot {} '{}': {}", step, tmp, std::strerror(e)));
  };
  for (const char* p = data.data(); p < data.data() + data.size();) {
    const ssize_t n = ::write(fd, p, size_t(data.data() + data.size() - p));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw fail("write");
    p += n;
  }
  if (::fsync(fd) != 0) throw fail("flush to disk");  // a full disk may show only here (delayed allocation)
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot close '{}': {}", tmp, std::strerror(e)));
  }
}

/// Makes the renames in `dir` durable. Errors are ignored: some filesystems refuse to fsync a directory.
inline void fsync_dir(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

/// `<pid>-<n>`: the process (whose death makes a leftover removable) and a count, so that two threads of one
/// process saving beside each other never share a temp name.
inline std::string save_id() {
  static std::atomic<uint64_t> n{0};
  return fmt::format("{}-{}", ::getpid(), n++);
}

/// Whether `s` is a save_id (or a bare process id).
inline bool is_save_id(std::string_view s) {
  return !s.empty() && s[0] != '-' && s.find_first_not_of("0123456789-") == std::string_view::npos;
}

inline std::string temp_name(const std::filesystem::path& target, std::string_view what) {
  return (target.parent_path() / fmt::format(".{}.{}.{}", target.filename().string(), what, save_id())).string();
}

/// Whether `name` is `prefix` followed by a save_id of a process that is gone: the leftover of a killed save.
inline bool left_by_dead_process(const std::string& name, std::string_view prefix) {
  if (!name.starts_with(prefix) || !is_save_id(std::string_view(name).substr(prefix.size()))) return false;
  const std::string digits = name.substr(prefix.size(), name.find('-', prefix.size()) - prefix.size());
  if (digits.empty() || digits.size() > 9) return false;
  const pid_t pid = pid_t(std::atol(digits.c_str()));
  return pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
}

/// Removes the entries of `dir` that killed saves left behind, named `prefix` + a process id.
inline void remove_leftovers(const std::filesystem::path& dir, const std::vector<std::string>& prefixes) {
  std::error_code ec;
  std::vector<std::filesystem::path> gone;
  for (auto it = std::filesystem::directory_iterator(dir.empty() ? "." : dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    for (auto& p : prefixes)
      if (left_by_dead_process(it->path().filename().string(), p)) gone.push_back(it->path());
  for (auto& p : gone) std::filesystem::remove_all(p, ec);
}

/// Replaces the sidecar `sp` by one holding `lists` (temp file, fsync, rename, fsync of the directory).
inline void write_sum(const std::filesystem::path& sp, const std::vector<SumList>& lists) {
  const std::string tmp = temp_name(sp, "tmp");
  write_synced(tmp, sum_text(lists));
  if (::rename(tmp.c_str(), sp.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot rename '{}' to '{}': {}", tmp, sp.string(), std::strerror(e)));
  }
  fsync_dir(sp.parent_path());
}

/// Saves `data` to `path` with its sidecar, crash-safely (steps 1 to 4 at the top of this file). `parts` are the
/// tensors in file order, name and byte length; their lengths add up to data.size(). oar::Error naming `path`
/// and saying the previous file is untouched when the directory is read-only, the disk full, ...
inline void save_with_sum(const std::filesystem::path& path, std::string_view data, const std::vector<std::pair<std::string, size_t>>& parts) {
  namespace fs = std::filesystem;
  const fs::path dir = path.parent_path();
  std::error_code ec;
  const bool existed = fs::exists(fs::symlink_status(path, ec));
  auto fail = [&](const std::string& why) {
    return Error(fmt::format("cannot save '{}': {}; {}", path.string(), why,
                             existed ? "the previous file is untouched" : "nothing was written"));
  };
  if (!dir.empty() && !fs::is_directory(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) throw fail(fmt::format("cannot create the directory '{}': {}", dir.string(), ec.message()));
  }
  SumList now;
  size_t at = 0;
  for (auto& [name, n] : parts) {
    now.push_back({name, n, crc32_of(data.substr(at, n))});
    at += n;
  }
  OAR_CHECK(at == data.size(), "save_with_sum '{}': the parts cover {} of {} bytes", path.string(), at, data.size());
  const fs::path sp = sum_path(path);
  const std::string fname = path.filename().string();
  if (existed) remove_leftovers(dir, {"." + fname + ".tmp.", "." + fname + ".oarsum.tmp."});

  const std::string tmp = temp_name(path, "tmp");
  try {
    write_synced(tmp, data);  // 1
  } catch (const Error& e) {
    throw fail(e.message());
  }
  // 2: the sidecar for both the old data and the new.
  std::vector<SumList> lists;
  try {
    std::string text;
    if (read_if_exists(sp, text)) lists = parse_sum(text, sp.string());
  } catch (const Error&) {
    lists.clear();  // a damaged sidecar is replaced: the old data is then checksummed as it is, below
  }
  try {
    std::string old;
    if (lists.empty() && existed && read_if_exists(path, old)) lists.push_back({{fname, old.size(), crc32_of(old)}});
    if (std::find(lists.begin(), lists.end(), now) == lists.end()) lists.push_back(now);
    write_sum(sp, lists);
  } catch (const Error& e) {
    ::unlink(tmp.c_str());
    throw fail(e.message());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {  // 3
    const int e = errno;
    ::unlink(tmp.c_str());
    throw fail(fmt::format("cannot rename '{}' to it: {}", tmp, std::strerror(e)));
  }
  fsync_dir(dir);
  // 4. Should this fail (a disk full to the last byte), the sidecar still lists the new checksums beside the
  // old ones and agrees with the data: the save has happened, only a later load checks a little more.
  if (lists.size() > 1) {
    try {
      write_sum(sp, {now});
    } catch (const Error&) {
    }
  }
}

/// Whether `name`, an entry of the model directory `dir`, is a file oar wrote (and a save may replace).
inline bool written_by_oar(const std::filesystem::path& dir, const std::string& name) {
  auto& reserved = model_file_names();
  if (std::find(reserved.begin(), reserved.end(), name) != reserved.end() || name.ends_with(".oarsum")) return true;
  std::error_code ec;
  if (std::filesystem::exists(dir / (name + ".oarsum"), ec)) return true;  // a parameter file oar checksummed
  const size_t tmp = name.rfind(".tmp.");
  return name.starts_with('.') && tmp != std::string::npos && is_save_id(std::string_view(name).substr(tmp + 5));
}

/// The directory a save or load of `p` works on: absolute, without a trailing '/', a symlink followed (so a
/// link `current -> v3` stays a link and v3 is replaced).
inline std::filesystem::path resolved_dir(const std::filesystem::path& p) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path d = fs::absolute(p, ec).lexically_normal();
  if (d.filename().empty()) d = d.parent_path();
  if (fs::is_symlink(d, ec)) {
    fs::path c = fs::canonical(d, ec);
    if (!ec) d = c;
  }
  return d;
}

/// When a crash came between the two renames of the fallback swap, `dir` is missing and the previous directory
/// lies beside it as `.<name>.oar-old.<pid>-<n>`: renames it back. True when it did.
inline bool recover_directory(const std::filesystem::path& p) {
  namespace fs = std::filesystem;
  const fs::path dir = resolved_dir(p);
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dir, ec))) return false;
  const std::string prefix = "." + dir.filename().string() + ".oar-old.";
  fs::path newest;
  fs::file_time_type newest_time{};
  for (auto it = fs::directory_iterator(dir.parent_path(), ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (!n.starts_with(prefix) || !is_save_id(std::string_view(n).substr(prefix.size()))) continue;
    std::error_code tec;
    const auto t = fs::last_write_time(it->path(), tec);
    if (newest.empty() || t > newest_time) newest = it->path(), newest_time = t;
  }
  if (newest.empty() || ::rename(newest.c_str(), dir.c_str()) != 0) return false;  // none, or another process put one back
  fsync_dir(dir.parent_path());
  return true;
}

/// Saves a directory so that a crash at any moment leaves the old one or the new one whole (see the top of this
/// file): `write` fills an empty staging directory, which then replaces `target`. oar::Error naming `target`
/// and saying the previous model is untouched when anything fails before the swap.
inline void save_directory(const std::filesystem::path& target, const std::function<void(const std::filesystem::path&)>& write) {
  namespace fs = std::filesystem;
  std::error_code ec;
  recover_directory(target);
  const fs::path dir = resolved_dir(target), parent = dir.parent_path();
  const std::string name = dir.filename().string();
  const bool existed = fs::exists(fs::symlink_status(dir, ec));
  auto fail = [&](const std::string& why) {
    return Error(fmt::format("cannot save the model directory '{}': {}; {}", target.string(), why,
                             existed ? "the previous model there is untouched" : "nothing was written"));
  };
  if (existed && !fs::is_directory(dir, ec)) throw fail("it exists and is not a directory");
  fs::create_directories(parent, ec);
  if (ec) throw fail(fmt::format("cannot create '{}': {}", parent.string(), ec.message()));
  if (existed && ::access(dir.c_str(), W_OK) != 0) throw fail(fmt::format("'{}' is not writable: {}", dir.string(), std::strerror(errno)));
  struct stat ds {}, ps {};
  if (existed && ::stat(dir.c_str(), &ds) == 0 && ::stat(parent.c_str(), &ps) == 0 && ds.st_dev != ps.st_dev) {
    // A mount point cannot be renamed: each file is still replaced atomically and checked, but a kill between
    // two files can leave files of two saves.
    try {
      write(dir);
    } catch (const Error& e) {
      throw fail(e.message());
    }
    return;
  }
  remove_leftovers(parent, {"." + name + ".oar-staging."});
  if (existed) remove_leftovers(parent, {"." + name + ".oar-old."});  // the target is whole: these are stale

  const fs::path staging = parent / fmt::format(".{}.oar-staging.{}", name, save_id());
  fs::remove_all(staging, ec);
  if (!fs::create_directory(staging, ec))
    throw fail(fmt::format("cannot create the staging directory '{}': {}", staging.string(), ec ? ec.message() : "it exists"));
  try {
    write(staging);
    if (existed) {
      for (auto it = fs::directory_iterator(dir); it != fs::directory_iterator(); ++it) {  // the user's files come along
        const std::string n = it->path().filename().string();
        if (fs::exists(fs::symlink_status(staging / n, ec)) || written_by_oar(dir, n)) continue;
        fs::copy(it->path(), staging / n, fs::copy_options::recursive | fs::copy_options::copy_symlinks | fs::copy_options::create_hard_links, ec);
        if (ec) {  // another filesystem inside, or links refused: a copy
          std::error_code rec;
          fs::remove_all(staging / n, rec);
          fs::copy(it->path(), staging / n, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
        }
        if (fs::is_directory(fs::symlink_status(staging / n, ec)))
          for (auto& sub : fs::recursive_directory_iterator(staging / n))
            if (sub.is_directory() && !sub.is_symlink()) fsync_dir(sub.path());
      }
      fs::permissions(staging, fs::status(dir).permissions(), ec);
    }
    fsync_dir(staging);
  } catch (const std::exception& e) {
    fs::remove_all(staging, ec);
    throw fail(dynamic_cast<const Error*>(&e) ? static_cast<const Error&>(e).message() : std::string(e.what()));
  }
  if (!existed) {
    if (::rename(staging.c_str(), dir.c_str()) != 0) {
      const int e = errno;
      fs::remove_all(staging, ec);
      throw fail(fmt::format("cannot rename '{}' to it: {}", staging.string(), std::strerror(e)));
    }
    fsync_dir(parent);
    return;
  }
  int err = EINVAL;
#if defined(__linux__) && defined(RENAME_EXCHANGE)
  if (!no_rename_exchange.load()) {
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
      fsync_dir(parent);
      fs::remove_all(staging, ec);  // the old model now; a failure leaves a leftover the next save removes
      return;
    }
    err = errno;
  }
#endif
  if (err != EINVAL && err != ENOSYS && err != ENOTSUP) {
    fs::remove_all(staging, ec);
    throw fail(fmt::format("cannot swap '{}' in: {}", staging.string(), std::strerror(err)));
  }
  const fs::path aside = parent / fmt::format(".{}.oar-old.{}", name, save_id());
  if (::rename(dir.c_str(), aside.c_str()) != 0) {
    const int e = errno;
    fs::remove_all(staging, ec);
    throw fail(fmt::format("cannot move it aside to '{}': {}", aside.string(), std::strerror(e)));
  }
  if (::rename(staging.c_str(), dir.c_str()) != 0) {
    const int e = errno;
    ::rename(aside.c_str(), dir.c_str());
    fs::remove_all(staging, ec);
    throw fail(fmt::format("cannot rename '{}' to it: {}", staging.string(), std::strerror(e)));
  }
  fsync_dir(parent);
  fs::remove_all(aside, ec);
}

}  // namespace oar::io::detail
