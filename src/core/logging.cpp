// log_line: formats "<time> <level> message" and writes it with one fwrite so lines never interleave.
#include "core/logging.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

namespace beam {

void log_line(LogLevel level, std::string_view message) {
  const char* tag = "I";
  switch (level) {
    case LogLevel::kDebug: tag = "D"; break;
    case LogLevel::kInfo: tag = "I"; break;
    case LogLevel::kWarning: tag = "W"; break;
    case LogLevel::kError: tag = "E"; break;
  }
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string line = std::string(ts) + "." + std::to_string(1000 + ms).substr(1) + "Z " + tag + " " +
                     std::string(message) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace beam
