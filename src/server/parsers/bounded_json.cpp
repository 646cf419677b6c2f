// parse_bounded_json: nlohmann's parser with a callback that counts nesting and key inserts and
// stops the parse (by an exception of its own) past either limit.
#include "server/parsers/bounded_json.h"

#include <string>
#include <vector>

namespace beam::server {
namespace {

using Json = nlohmann::ordered_json;

struct LimitExceeded {
  std::string message;
};

class Limits {
 public:
  bool on_event(Json::parse_event_t event) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (++depth_ > kMaxJsonDepth)
          throw LimitExceeded{"refused: it nests arrays and objects more than " +
                              std::to_string(kMaxJsonDepth) + " deep"};
        keys_.push_back(event == Json::parse_event_t::object_start ? 0 : -1);
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        --depth_;
        keys_.pop_back();
        break;
      case Json::parse_event_t::key:
        key_work_ += keys_.back()++;
        if (key_work_ > kMaxJsonKeyWork)
          throw LimitExceeded{"refused: its objects hold too many keys (more than " +
                              std::to_string(kMaxJsonObjectKeys) +
                              " in one object, or as many key comparisons in several)"};
        break;
      case Json::parse_event_t::value:
        break;
    }
    return true;
  }

 private:
  int32_t depth_ = 0;
  int64_t key_work_ = 0;
  std::vector<int64_t> keys_;  // keys so far of each open object (-1: an array)
};

}  // namespace

Expected<Json> parse_bounded_json(std::string_view text) {
  Limits limits;
  try {
    return Json::parse(text.begin(), text.end(), [&limits](int, Json::parse_event_t event, Json&) {
      return limits.on_event(event);
    });
  } catch (const LimitExceeded& e) {
    return make_error(e.message);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e999999
    return make_error(std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace beam::server
