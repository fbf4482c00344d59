// A small command-line parser shared by rampd and rampctl: "--name value", "--name=value",
// and a config file of "name = value" lines that flags override.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ramp/status.h"

namespace ramp::tools {

class Flags {
 public:
  // known: flag names that take a value; switches: flags without one.
  Flags(std::vector<std::string> known, std::vector<std::string> switches)
      : known_(std::move(known)), switches_(std::move(switches)) {}

  // Parses argv; words that are not flags are collected as positional arguments.
  Status Parse(int argc, char** argv);
  // Reads "name = value" lines (# comments); values already given on the command line win.
  Status LoadConfig(const std::string& path);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  // Every value of a repeatable flag, in order.
  std::vector<std::string> GetAll(const std::string& name) const;
  Status GetInt(const std::string& name, long fallback, long min, long max, long* out) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  bool Known(const std::string& n) const;
  bool Switch(const std::string& n) const;
  std::vector<std::string> known_, switches_;
  std::multimap<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace ramp::tools
