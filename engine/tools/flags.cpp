#include "flags.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>

namespace ramp::tools {

bool Flags::Known(const std::string& n) const {
  return std::find(known_.begin(), known_.end(), n) != known_.end();
}
bool Flags::Switch(const std::string& n) const {
  return std::find(switches_.begin(), switches_.end(), n) != switches_.end();
}

Status Flags::Parse(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_.push_back(a);
      continue;
    }
    a = a.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = a.find('='); eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    if (Switch(a)) {
      if (has_value) return Status::InvalidArgument("--" + a + " takes no value");
      values_.emplace(a, "1");
      continue;
    }
    if (!Known(a)) return Status::InvalidArgument("unknown option --" + a + " (see --help)");
    if (!has_value) {
      if (i + 1 >= argc) return Status::InvalidArgument("--" + a + " needs a value");
      value = argv[++i];
    }
    values_.emplace(a, value);
  }
  return Status::OK();
}

Status Flags::LoadConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::FromErrno("cannot read config file " + path, errno);
  std::string line;
  int lineno = 0;
  std::multimap<std::string, std::string> from_file;
  while (std::getline(in, line)) {
    lineno++;
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t\r"));
      s.erase(s.find_last_not_of(" \t\r") + 1);
      return s;
    };
    line = trim(line);
    if (line.empty()) continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument(path + ":" + std::to_string(lineno) + ": expected name = value");
    }
    std::string name = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (!Known(name) && !Switch(name)) {
      return Status::InvalidArgument(path + ":" + std::to_string(lineno) + ": unknown setting '" +
                                     name + "'");
    }
    from_file.emplace(name, value);
  }
  for (auto& [k, v] : from_file) {
    if (!values_.count(k)) values_.emplace(k, v);
  }
  return Status::OK();
}

std::string Flags::Get(const std::string& name, const std::string& fallback) const {
  auto range = values_.equal_range(name);
  if (range.first == range.second) return fallback;
  return std::prev(range.second)->second;  // the last one wins
}

std::vector<std::string> Flags::GetAll(const std::string& name) const {
  std::vector<std::string> out;
  auto range = values_.equal_range(name);
  for (auto it = range.first; it != range.second; ++it) out.push_back(it->second);
  return out;
}

Status Flags::GetInt(const std::string& name, long fallback, long min, long max, long* out) const {
  if (!Has(name)) {
    *out = fallback;
    return Status::OK();
  }
  const std::string v = Get(name);
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v.c_str(), &end, 10);
  if (errno != 0 || end == v.c_str() || *end != '\0' || x < min || x > max) {
    return Status::InvalidArgument("--" + name + " wants a number in " + std::to_string(min) +
                                   ".." + std::to_string(max) + ", got '" + v + "'");
  }
  *out = x;
  return Status::OK();
}

}  // namespace ramp::tools
