// Prometheus exposition: cumulative histogram buckets, counters by endpoint and status, engine
// gauges (pools, queue depth, hit rate), label escaping.
#include <gtest/gtest.h>

#include "server/metrics/server_metrics.h"

namespace beam::server {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(Histogram, CumulativeBuckets) {
  Histogram h({0.1, 1, 10});
  h.observe(0.05);
  h.observe(0.1);  // le: on the bound counts in that bucket
  h.observe(5);
  h.observe(100);
  std::string out;
  h.render(out, "x");
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"0.1\"} 2"));
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"1\"} 2"));
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"10\"} 3"));
  EXPECT_TRUE(has_line(out, "x_bucket{le=\"+Inf\"} 4"));
  EXPECT_TRUE(has_line(out, "x_sum 105.15"));
  EXPECT_TRUE(has_line(out, "x_count 4"));
}

TEST(ServerMetrics, RequestsByEndpointAndStatus) {
  ServerMetrics m;
  m.record_request("/v1/chat/completions", 200);
  m.record_request("/v1/chat/completions", 200);
  m.record_request("/v1/chat/completions", 400);
  m.record_request("/v1/messages", kClientClosedStatus);
  const std::string text = m.render(std::nullopt, ServerGauges{});
  EXPECT_TRUE(has_line(text, "beamserve_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 2"));
  EXPECT_TRUE(has_line(text, "beamserve_http_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"} 1"));
  EXPECT_TRUE(has_line(text, "beamserve_http_requests_total{endpoint=\"/v1/messages\",status=\"499\"} 1"));
  EXPECT_TRUE(has_line(text, "beamserve_ready 0"));
  EXPECT_EQ(text.find("beamserve_kv_blocks"), std::string::npos);  // no engine yet
  EXPECT_EQ((m.requests().at({"/v1/chat/completions", 200})), 2);
}

TEST(ServerMetrics, EngineNumbers) {
  ServerMetrics m;
  m.observe_time_to_first_token(0.02);
  EngineStats e;
  e.running = 3;
  e.waiting = 7;
  e.prompt_tokens = 200;
  e.cached_prompt_tokens = 50;
  e.generated_tokens = 99;
  e.generation_tokens_per_s = 12.5;
  e.full_pool = PoolStats{100, 60, 30};
  e.sliding_pool = PoolStats{40, 40, 0};
  ServerGauges gauges;
  gauges.ready = true;
  gauges.open_connections = 5;
  gauges.active_generations = 2;
  const std::string text = m.render(e, gauges);
  EXPECT_TRUE(has_line(text, "beamserve_requests_running 3"));
  EXPECT_TRUE(has_line(text, "beamserve_requests_waiting 7"));
  EXPECT_TRUE(has_line(text, "beamserve_prompt_tokens_total 200"));
  EXPECT_TRUE(has_line(text, "beamserve_cached_prompt_tokens_total 50"));
  EXPECT_TRUE(has_line(text, "beamserve_generated_tokens_total 99"));
  EXPECT_TRUE(has_line(text, "beamserve_generation_tokens_per_second 12.5"));
  EXPECT_TRUE(has_line(text, "beamserve_prefix_cache_hit_rate 0.25"));
  EXPECT_TRUE(has_line(text, "beamserve_kv_blocks{pool=\"full\",state=\"total\"} 100"));
  EXPECT_TRUE(has_line(text, "beamserve_kv_blocks{pool=\"full\",state=\"free\"} 60"));
  EXPECT_TRUE(has_line(text, "beamserve_kv_blocks{pool=\"full\",state=\"cached\"} 30"));
  EXPECT_TRUE(has_line(text, "beamserve_kv_blocks{pool=\"full\",state=\"used\"} 10"));
  EXPECT_TRUE(has_line(text, "beamserve_kv_blocks{pool=\"sliding\",state=\"free\"} 40"));
  EXPECT_TRUE(has_line(text, "beamserve_open_connections 5"));
  EXPECT_TRUE(has_line(text, "beamserve_active_generations 2"));
  EXPECT_TRUE(has_line(text, "beamserve_time_to_first_token_seconds_count 1"));
  // Every sample line belongs to a declared metric.
  EXPECT_NE(text.find("# TYPE beamserve_kv_blocks gauge"), std::string::npos);
}

TEST(ServerMetrics, LoraRequestsInfo) {
  ServerMetrics m;
  EngineStats e;
  e.last_step_unix_s = 1700000000;
  EXPECT_EQ(m.render(e, ServerGauges{}).find("lora_requests_info"), std::string::npos);  // LoRA off
  e.max_loras = 4;
  e.running_loras = {"a", "b\"x"};
  e.waiting_loras = {"c"};
  EXPECT_TRUE(has_line(m.render(e, ServerGauges{}),
                       "beamserve_lora_requests_info{running_lora_adapters=\"a,b\\\"x\","
                       "waiting_lora_adapters=\"c\",max_lora=\"4\"} 1700000000"));
}

TEST(ServerMetrics, DataParallelReplicasEachGetTheirQueuesAndKvUse) {
  ServerMetrics m;
  EngineStats a, b;
  a.running = 2;
  a.full_pool = PoolStats{100, 50, 25};
  b.waiting = 4;
  b.full_pool = PoolStats{100, 100, 0};
  ServerGauges one;
  one.replicas = {a};
  EXPECT_EQ(m.render(a, one).find("beamserve_replica_"), std::string::npos);  // one replica
  ServerGauges two;
  two.replicas = {a, b};
  const std::string text = m.render(a, two);
  EXPECT_TRUE(has_line(text, "beamserve_replica_requests_running{replica=\"0\"} 2"));
  EXPECT_TRUE(has_line(text, "beamserve_replica_requests_running{replica=\"1\"} 0"));
  EXPECT_TRUE(has_line(text, "beamserve_replica_requests_waiting{replica=\"1\"} 4"));
  EXPECT_TRUE(has_line(text, "beamserve_replica_kv_usage{replica=\"0\"} 0.25"));
  EXPECT_TRUE(has_line(text, "beamserve_replica_kv_usage{replica=\"1\"} 0"));
}

TEST(ServerMetrics, LabelEscaping) {
  EXPECT_EQ(prometheus_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(prometheus_number(0.5), "0.5");
  EXPECT_EQ(prometheus_number(3), "3");
}

}  // namespace
}  // namespace beam::server

#include "server/app/admin_endpoints.h"

namespace beam::server {
namespace {

TEST(Health, Verdicts) {
  HealthInputs in;
  EXPECT_EQ(evaluate_health(in), HealthVerdict::kLoading);
  in.load_failed = true;
  EXPECT_EQ(evaluate_health(in), HealthVerdict::kFailed);
  in = HealthInputs{};
  in.loaded = true;
  in.now_unix_s = 1000;
  in.last_step_unix_s = 10;  // idle for a long time: fine
  EXPECT_EQ(evaluate_health(in), HealthVerdict::kOk);
  in.busy = true;
  in.busy_since_unix_s = 999;  // just became busy: the engine has not had a chance to step
  EXPECT_EQ(evaluate_health(in), HealthVerdict::kOk);
  in.busy_since_unix_s = 900;  // busy for 100 s without a step
  EXPECT_EQ(evaluate_health(in), HealthVerdict::kStalled);
  in.last_step_unix_s = 995;   // busy for long, but steps keep coming
  EXPECT_EQ(evaluate_health(in), HealthVerdict::kOk);
  in.last_step_unix_s = 10;
  in.asleep = true;  // requests wait for the wake-up on purpose
  EXPECT_EQ(evaluate_health(in), HealthVerdict::kAsleep);
  in.asleep = false;
  in.paused = true;  // requests wait for the resume on purpose
  EXPECT_EQ(evaluate_health(in), HealthVerdict::kPaused);
}

// With data-parallel replicas a replica holding requests that stopped stepping stalls the health
// check though another steps; idle replicas' old steps do not.
TEST(Health, OneStuckReplicaIsAStall) {
  EngineStats stepping, stuck, idle;
  stepping.running = 3;
  stepping.last_step_unix_s = 995;
  stuck.waiting = 2;
  stuck.last_step_unix_s = 800;
  idle.last_step_unix_s = 10;
  EXPECT_EQ(last_step_unix_s({}), 0);
  EXPECT_EQ(last_step_unix_s({stepping, idle}), 995);
  EXPECT_EQ(last_step_unix_s({idle, stepping, stuck}), 800);
  EXPECT_EQ(last_step_unix_s({idle}), 10);
  HealthInputs in;
  in.loaded = true;
  in.busy = true;
  in.now_unix_s = 1000;
  in.busy_since_unix_s = 700;
  in.last_step_unix_s = last_step_unix_s({stepping, stuck});
  EXPECT_EQ(evaluate_health(in), HealthVerdict::kStalled);
  in.last_step_unix_s = last_step_unix_s({stepping, idle});
  EXPECT_EQ(evaluate_health(in), HealthVerdict::kOk);
}

}  // namespace
}  // namespace beam::server
