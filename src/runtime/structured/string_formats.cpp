#include "runtime/structured/string_formats.h"

namespace beam {
namespace {

constexpr std::string_view kDate = R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))";
constexpr std::string_view kTime =
    R"(([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d{1,9})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))";
// A host name's label: letters, digits and inner hyphens, 1-63 bytes.
constexpr std::string_view kLabel = R"([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)";

std::string duration() {
  const std::string n = R"(\d{1,9})";
  const std::string time =
      "T(" + n + "H(" + n + "M)?(" + n + "S)?|" + n + "M(" + n + "S)?|" + n + "S)";
  const std::string date = n + "Y(" + n + "M)?(" + n + "D)?|" + n + "M(" + n + "D)?|" + n + "D";
  return "^P(" + n + "W|(" + date + ")(" + time + ")?|" + time + ")$";
}

// RFC 4291 text forms without an embedded IPv4 address or a zone.
std::string ipv6() {
  const std::string h = "[0-9a-fA-F]{1,4}";
  return "^((" + h + ":){7}" + h + "|(" + h + ":){1,7}:|(" + h + ":){1,6}:" + h + "|(" + h +
         ":){1,5}(:" + h + "){1,2}|(" + h + ":){1,4}(:" + h + "){1,3}|(" + h + ":){1,3}(:" + h +
         "){1,4}|(" + h + ":){1,2}(:" + h + "){1,5}|" + h + ":(:" + h + "){1,6}|:((:" + h +
         "){1,7}|:))$";
}

}  // namespace

std::optional<std::string> format_regex(std::string_view format) {
  const std::string label(kLabel);
  if (format == "date") return "^" + std::string(kDate) + "$";
  if (format == "time") return "^" + std::string(kTime) + "$";
  if (format == "date-time") return "^" + std::string(kDate) + "T" + std::string(kTime) + "$";
  if (format == "duration") return duration();
  if (format == "email")
    return R"(^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@)" + label +
           R"((\.)" + label + ")+$";
  if (format == "hostname") return "^" + label + R"((\.)" + label + ")*$";
  if (format == "ipv4")
    return R"(^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$)";
  if (format == "ipv6") return ipv6();
  if (format == "uuid")
    return "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
  return std::nullopt;
}

}  // namespace beam
