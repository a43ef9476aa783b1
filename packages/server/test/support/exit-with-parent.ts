/**
 * Preloaded (`--import`) into a service process a test spawns: the process stops when the test's process
 * dies, however it dies (a vitest worker killed on a timeout, a crash), so no run leaves a service behind.
 * The spawning side keeps this process's stdin open as a pipe; the pipe closes when the spawner dies.
 */
const GRACE_MS = 5_000;

process.stdin.on("end", () => {
  // The service's own SIGTERM handler closes it cleanly; if that does not finish, it is cut short.
  setTimeout(() => process.exit(1), GRACE_MS).unref();
  process.kill(process.pid, "SIGTERM");
});
process.stdin.resume();
// The open stdin must not be what keeps the service alive once it has closed everything else.
(process.stdin as { unref?: () => void }).unref?.();
