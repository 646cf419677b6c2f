// `beamserve serve`: the OpenAI- and Anthropic-compatible HTTP server (src/server) in front of the
// engine. Listens on 127.0.0.1 unless --host says otherwise; SIGINT/SIGTERM shut it down cleanly.
#include <pthread.h>

#include <csignal>
#include <cstdio>

#include "cli/commands.h"
#include "cli/serve_options.h"
#include "cli/usage.h"

namespace beam::cli {

int cmd_serve(int argc, char** argv) {
  auto args = parse_serve_args(argc, argv);
  if (!args.ok()) {
    std::fprintf(stderr, "serve: %s\n%s", args.error().message.c_str(), kServeUsage);
    return 2;
  }
  auto options = serve_options_from_args(*args);
  if (!options.ok()) {
    std::fprintf(stderr, "serve: %s\n%s", options.error().message.c_str(), kServeUsage);
    return 2;
  }
  // Threads started below inherit this mask, so only sigwait sees SIGINT/SIGTERM.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  auto app = server::ServerApp::start(*options);
  if (!app.ok()) {
    std::fprintf(stderr, "serve: %s\n", app.error().message.c_str());
    return 1;
  }
  if (Status loaded = (*app)->wait_loaded(); !loaded.ok()) {
    std::fprintf(stderr, "serve: %s\n", loaded.error().message.c_str());
    return 1;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "serve: signal %d, shutting down\n", sig);
  app->reset();
  return 0;
}

}  // namespace beam::cli
