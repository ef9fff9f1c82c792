// apps/agentr1/stop_signals.h — Ctrl-C (SIGINT) and SIGTERM as a request to stop at the
// next safe point instead of dying mid-step.
//
//   RLTrainer trainer(cfg, tree);
//   trainer.set_stop_flag(install_stop_signals());   // the first signal sets the flag
//   try { trainer.run(mode); } catch (const train::StopRequested& e) { ... exit 128 + sig }
//
// The first SIGINT or SIGTERM stores its number in the flag and writes one line to
// stderr ("stopping after this step ..."); the handlers then go back to the default, so
// a second signal ends the process at once.
#pragma once

#include <atomic>

namespace agentr1::cli {

// Installs the handlers (idempotent) and returns the flag: 0 until a signal arrived,
// then its number.
const std::atomic<int>* install_stop_signals();

// 128 + the signal that stopped the run (130 for SIGINT, 143 for SIGTERM), as a shell
// reports a process killed by it; 1 if none did.
int stop_exit_code();

}  // namespace agentr1::cli
