#include "ramp/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <mutex>
#include <thread>
#include <vector>

#include "ramp/log.h"

namespace ramp {
namespace {

TEST(Status, CodesAndStrings) {
  EXPECT_TRUE(Status::OK().ok());
  EXPECT_EQ(Status::OK().ToString(), "OK");
  Status s = Status::NotFound("region 3");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.Is(Status::Code::kNotFound));
  EXPECT_EQ(s.ToString(), "NotFound: region 3");
  EXPECT_EQ(s.Annotate("read").ToString(), "NotFound: read: region 3");
  EXPECT_TRUE(Status::OK().Annotate("x").ok());
  Status e = Status::FromErrno("open /x", ENOENT);
  EXPECT_TRUE(e.Is(Status::Code::kIOError));
  EXPECT_NE(e.message().find("open /x: No such file"), std::string::npos);
  for (int c = 0; c <= static_cast<int>(Status::Code::kInternal); c++) {
    EXPECT_STRNE(Status::CodeName(static_cast<Status::Code>(c)), "Unknown");
  }
}

TEST(Status, ReturnIfError) {
  auto f = [](bool fail) -> Status {
    RAMP_RETURN_IF_ERROR(fail ? Status::Busy("full") : Status::OK());
    return Status::Internal("reached");
  };
  EXPECT_TRUE(f(true).Is(Status::Code::kBusy));
  EXPECT_TRUE(f(false).Is(Status::Code::kInternal));
}

TEST(Log, SinkLevelsAndThreads) {
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> lines;
  SetLogSink([&](LogLevel level, const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.emplace_back(level, line);
  });
  SetLogLevel(LogLevel::kInfo);
  RAMP_DEBUG("dropped %d", 1);
  RAMP_INFO("kept %d %s", 2, "x");
  RAMP_ERROR("error %s", "y");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([t] {
      for (int i = 0; i < 100; i++) RAMP_WARN("thread %d line %d", t, i);
    });
  }
  for (auto& t : threads) t.join();
  SetLogSink(nullptr);
  ASSERT_EQ(lines.size(), 2u + 400u);
  EXPECT_EQ(lines[0].second, "kept 2 x");
  EXPECT_EQ(lines[1].first, LogLevel::kError);
  LogLevel parsed;
  EXPECT_TRUE(ParseLogLevel("warning", &parsed));
  EXPECT_EQ(parsed, LogLevel::kWarning);
  EXPECT_FALSE(ParseLogLevel("loud", &parsed));
}

}  // namespace
}  // namespace ramp
