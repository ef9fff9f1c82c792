// agentr1/core/registry.h — name -> factory registries (strings at the edge).
//
//   using EnvRegistry = Registry<AgentEnv, const EnvContext&, const json&>;
//   EnvRegistry::instance().add("tool", [](const EnvContext& c, const json& kw) { ... });
//   auto env = EnvRegistry::instance().create("tool", ctx, kwargs);
//   // unknown name -> Error "unknown AgentEnv 'x'; known: a, b"
//   // registering a name twice -> Error
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agentr1/core/error.h"

namespace agentr1 {

template <typename Base, typename... Args>
class Registry {
 public:
  using Factory = std::function<std::unique_ptr<Base>(Args...)>;

  // One registry per (Base, Args) type, created on first use (no init-order issues).
  static Registry& instance() {
    static Registry r;
    return r;
  }

  // what: human name of the kind of thing ("AgentEnv", "tool"), used in errors.
  void add(const std::string& name, Factory f, const std::string& what = "entry") {
    std::lock_guard<std::mutex> lock(mu_);
    AGENTR1_CHECK(!name.empty(), "cannot register a " << what << " with an empty name");
    AGENTR1_CHECK(factories_.count(name) == 0,
                  what << " '" << name << "' is registered twice");
    factories_[name] = std::move(f);
  }

  bool contains(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    return factories_.count(name) != 0;
  }

  std::vector<std::string> names() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& kv : factories_) out.push_back(kv.first);
    return out;
  }

  std::unique_ptr<Base> create(const std::string& name, Args... args,
                               const std::string& what = "entry") const {
    Factory f;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = factories_.find(name);
      if (it == factories_.end()) {
        std::string known;
        for (const auto& kv : factories_) known += (known.empty() ? "" : ", ") + kv.first;
        throw Error("unknown " + what + " '" + name + "'; known: " +
                    (known.empty() ? "(none registered)" : known));
      }
      f = it->second;
    }
    return f(std::forward<Args>(args)...);
  }

 private:
  Registry() = default;
  mutable std::mutex mu_;
  std::map<std::string, Factory> factories_;
};

}  // namespace agentr1
