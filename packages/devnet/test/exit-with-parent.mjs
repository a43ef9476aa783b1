// Preloaded (`--import`) into an svc-devnet process a test spawns: it stops when the test's process dies,
// however it dies (a vitest worker killed on a timeout, a crash), so no run leaves a devnet behind. The test
// keeps this process's stdin open as a pipe; the pipe closes when the test's process dies.
process.stdin.on("end", () => {
  // The CLI's SIGTERM handler stops anvil and the Solana server; if that does not finish, it is cut short.
  setTimeout(() => process.exit(1), 5_000).unref();
  process.kill(process.pid, "SIGTERM");
});
process.stdin.resume();
// The open stdin must not be what keeps the process alive once it has closed everything else.
process.stdin.unref?.();
