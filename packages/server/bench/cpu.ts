/**
 * CPU time spent by this process, by other processes picked by name, and by the whole machine, read from
 * Linux's /proc: what a benchmark phase cost, beside how fast it ran. On a shared machine the rates swing
 * with the load; the CPU a unit of work costs says where the time goes. Undefined where /proc is absent.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";

/** CPU seconds so far: this process, each process of each named group, and the machine (busy, and in all). */
interface CpuReading {
  self: number;
  groups: Record<string, Map<string, number>>;
  machineBusy: number;
  machineAll: number;
}

/** CPU seconds spent between two readings; a group's by its processes that lived through both or started since. */
interface CpuSpent {
  self: number;
  groups: Record<string, number>;
  machineBusy: number;
  machineAll: number;
}

/** Clock ticks per second of /proc's figures (USER_HZ, 100 on Linux). */
const TICKS = 100;

/** utime + stime of one /proc/<pid>/stat line, in seconds; the command name may hold spaces and parentheses. */
function statSeconds(stat: string): { command: string; seconds: number } {
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return {
    command: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")),
    seconds: (Number(fields[11]) + Number(fields[12])) / TICKS,
  };
}

/**
 * Reads the CPU time so far; `groups` names processes by the start of their command name (`anvil`,
 * `postgres`: every such process on the machine, this benchmark's and any other's).
 */
function readCpu(groups: Record<string, string>): CpuReading | undefined {
  if (!existsSync("/proc/stat")) return undefined;
  const processes: Record<string, Map<string, number>> = Object.fromEntries(
    Object.keys(groups).map((name) => [name, new Map<string, number>()]),
  );
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue; // exited meanwhile
    }
    const { command, seconds } = statSeconds(stat);
    for (const [name, prefix] of Object.entries(groups))
      if (command.startsWith(prefix)) processes[name]?.set(pid, seconds);
  }
  const machine = (readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "").split(/\s+/).slice(1).map(Number);
  const all = machine.reduce((sum, ticks) => sum + ticks, 0);
  // idle and iowait
  const idle = (machine[3] ?? 0) + (machine[4] ?? 0);
  const usage = process.cpuUsage();
  return {
    self: (usage.user + usage.system) / 1e6,
    groups: processes,
    machineBusy: (all - idle) / TICKS,
    machineAll: all / TICKS,
  };
}

/**
 * Adds up the CPU that the phases measured through it spent, for a per-unit figure at the end.
 * @example const meter = new CpuMeter({ node: "anvil" }); await meter.measure(phase); meter.perUnit(sends);
 */
export class CpuMeter {
  readonly #groups: Record<string, string>;
  #spent: CpuSpent | undefined;

  constructor(groups: Record<string, string>) {
    this.#groups = groups;
  }

  /** Runs `work`, adding the CPU spent meanwhile; without /proc it only runs it. */
  async measure<T>(work: () => Promise<T>): Promise<T> {
    const before = readCpu(this.#groups);
    const result = await work();
    const after = readCpu(this.#groups);
    if (before && after) {
      const spent = this.#spent ?? { self: 0, groups: {}, machineBusy: 0, machineAll: 0 };
      this.#spent = {
        self: spent.self + after.self - before.self,
        groups: Object.fromEntries(
          Object.entries(after.groups).map(([name, processes]) => {
            // A process that exited meanwhile took its figure along: what it spent in the phase is lost.
            let seconds = spent.groups[name] ?? 0;
            for (const [pid, total] of processes) seconds += total - (before.groups[name]?.get(pid) ?? 0);
            return [name, seconds];
          }),
        ),
        machineBusy: spent.machineBusy + after.machineBusy - before.machineBusy,
        machineAll: spent.machineAll + after.machineAll - before.machineAll,
      };
    }
    return result;
  }

  /**
   * Milliseconds of CPU per unit of work: this process, each group, the machine; and the share of the
   * machine's CPU that was busy. Undefined when nothing was measured (no /proc).
   */
  perUnit(
    units: number,
  ): { self: number; groups: Record<string, number>; machine: number; busyShare: number } | undefined {
    const spent = this.#spent;
    if (!spent) return undefined;
    const ms = (seconds: number) => (seconds * 1000) / units;
    return {
      self: ms(spent.self),
      groups: Object.fromEntries(Object.entries(spent.groups).map(([name, seconds]) => [name, ms(seconds)])),
      machine: ms(spent.machineBusy),
      busyShare: spent.machineBusy / spent.machineAll,
    };
  }
}
