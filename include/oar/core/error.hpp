// oar/core/error.hpp: oar::Error (message + the user's source line + a context chain) and OAR_CHECK.
#pragma once
#include <fmt/core.h>
#include <fmt/format.h>

#include <source_location>
#include <stdexcept>
#include <string>
#include <vector>

namespace oar {

/// Where a user's call was made: file, line and the layer or API that was called there.
struct Origin {
  std::string file;
  int line = 0;
  std::string what;  ///< "fc", "data", "Executor::run", ...

  Origin() = default;
  Origin(std::source_location loc, std::string w = {}) : file(loc.file_name()), line(int(loc.line())), what(std::move(w)) {}
  Origin(std::string f, int l, std::string w) : file(std::move(f)), line(l), what(std::move(w)) {}
  bool known() const { return line > 0; }
  /// "model.cpp:12 (fc)"
  std::string str() const {
    if (!known()) return what.empty() ? std::string("<unknown>") : what;
    return what.empty() ? fmt::format("{}:{}", file, line) : fmt::format("{}:{} ({})", file, line, what);
  }
};

/// The one exception type oar throws for bad input: the message, where the user made the call, and a
/// chain of context lines added as the error travels up ("while replaying fc_0", "while running block 0").
class Error : public std::runtime_error {
 public:
  explicit Error(std::string message, Origin origin = {}) : std::runtime_error(message), message_(std::move(message)), origin_(std::move(origin)) {
    rebuild();
  }
  const std::string& message() const { return message_; }
  const Origin& origin() const { return origin_; }
  const std::vector<std::string>& context() const { return context_; }
  /// Adds a context line; the first origin given wins, so the innermost user line stays.
  Error& add_context(std::string line, const Origin& origin = {}) {
    context_.push_back(std::move(line));
    if (!origin_.known() && origin.known()) origin_ = origin;
    rebuild();
    return *this;
  }
  const char* what() const noexcept override { return full_.c_str(); }

 private:
  void rebuild() {
    full_ = origin_.known() ? fmt::format("{}: {}", origin_.str(), message_) : message_;
    for (auto& c : context_) full_ += "\n  " + c;
  }
  std::string message_;
  Origin origin_;
  std::vector<std::string> context_;
  std::string full_;
};

namespace detail {
template <class... Args>
[[noreturn]] inline void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}
}  // namespace detail

}  // namespace oar

/// Throws oar::Error with a formatted message when `cond` is false.
#define OAR_CHECK(cond, ...)                                   \
  do {                                                         \
    if (!(cond)) [[unlikely]] ::oar::detail::fail(__VA_ARGS__); \
  } while (0)
