// oar/io/checkpoint-inl.hpp: the implementation of checkpoint.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/io/checkpoint.hpp"

#include <cstdint>
#include <string_view>

#include "oar/core/error.hpp"
#include "oar/core/file.hpp"
#include "oar/io/tensor_file.hpp"

namespace oar::io {

namespace detail {
inline constexpr char kCheckpointMagic[8] = {'O', 'A', 'R', 'C', 'K', 'P', 'T', '\n'};
inline uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
inline void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}
inline uint64_t get_u64(std::string_view& in, const std::string& path) {
  if (in.size() < 8) throw Error(fmt::format("checkpoint '{}' is truncated", path));
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(in[size_t(i)])) << (8 * i);
  in.remove_prefix(8);
  return v;
}
inline std::string_view get_bytes(std::string_view& in, uint64_t n, const std::string& path) {
  if (in.size() < n) throw Error(fmt::format("checkpoint '{}' is truncated", path));
  auto s = in.substr(0, n);
  in.remove_prefix(n);
  return s;
}
}  // namespace detail

OAR_FUNC void save_checkpoint(const std::filesystem::path& path, const Checkpoint& c) {
  std::string out(detail::kCheckpointMagic, 8);
  detail::put_u64(out, 1);  // version
  auto section = [&](const std::string& name, std::string_view body) {
    detail::put_u64(out, name.size());
    out += name;
    detail::put_u64(out, body.size());
    out += body;
  };
  std::string meta;
  for (auto& [k, v] : c.meta) meta += k + "=" + v + "\n";
  section("meta", meta);
  for (auto& [k, v] : c.blobs) section("blob:" + k, v);
  std::string tensors;
  for (auto& [n, t] : c.tensors) {
    detail::put_u64(tensors, n.size());
    tensors += n;
    write_lod_tensor(tensors, t);
  }
  section("tensors", tensors);
  detail::put_u64(out, detail::fnv1a(out));
  oar::detail::write_file_atomic(path, out);
}

OAR_FUNC Checkpoint load_checkpoint(const std::filesystem::path& path) {
  const std::string p = path.string();
  std::string data = oar::detail::read_file(path);
  if (data.size() < 24 || data.compare(0, 8, std::string(detail::kCheckpointMagic, 8)) != 0)
    throw Error(fmt::format("'{}' is not an oar checkpoint (bad magic or too short)", p));
  std::string_view body(data.data(), data.size() - 8);
  std::string_view tail(data.data() + data.size() - 8, 8);
  if (detail::get_u64(tail, p) != detail::fnv1a(body)) throw Error(fmt::format("checkpoint '{}' is corrupted (checksum mismatch)", p));
  body.remove_prefix(8);
  uint64_t version = detail::get_u64(body, p);
  if (version != 1) throw Error(fmt::format("checkpoint '{}' has unsupported version {}", p, version));
  Checkpoint c;
  while (!body.empty()) {
    std::string name(detail::get_bytes(body, detail::get_u64(body, p), p));
    std::string_view sec = detail::get_bytes(body, detail::get_u64(body, p), p);
    if (name == "meta") {
      size_t at = 0;
      while (at < sec.size()) {
        size_t nl = sec.find('\n', at), eq = sec.find('=', at);
        if (nl == std::string_view::npos || eq == std::string_view::npos || eq > nl) throw Error(fmt::format("checkpoint '{}': malformed meta", p));
        c.meta[std::string(sec.substr(at, eq - at))] = std::string(sec.substr(eq + 1, nl - eq - 1));
        at = nl + 1;
      }
    } else if (name.starts_with("blob:")) {
      c.blobs[name.substr(5)] = std::string(sec);
    } else if (name == "tensors") {
      while (!sec.empty()) {
        std::string tn(detail::get_bytes(sec, detail::get_u64(sec, p), p));
        c.tensors.push_back({tn, read_lod_tensor(sec, p)});
      }
    } else {
      throw Error(fmt::format("checkpoint '{}': unknown section '{}'", p, name));
    }
  }
  return c;
}

}  // namespace oar::io
