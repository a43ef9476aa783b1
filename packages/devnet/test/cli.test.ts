import { spawn } from "node:child_process";
import net from "node:net";
import { fileURLToPath } from "node:url";
import { describe, expect, it, onTestFinished } from "vitest";
import { eventually } from "../../../test/support/eventually.ts";

const BIN = fileURLToPath(new URL("../bin/svc-devnet.mjs", import.meta.url));
const EXIT_WITH_PARENT = fileURLToPath(new URL("./exit-with-parent.mjs", import.meta.url));

async function post(url: string, method: string): Promise<unknown> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] }),
  });
  return ((await res.json()) as { result: unknown }).result;
}

type Facts = {
  evm: { rpcUrl: string; chainId: number; usdc: string };
  solana: { rpcUrl: string; usdcMint: string };
  treasury: { evm: { privateKey: string }; solana: { secretKey: number[] } };
};

/**
 * Starts the CLI and resolves with its process and the JSON it printed. The process is killed when the test
 * ends, however it ends, and exits by itself if this process dies (its stdin is a pipe from here).
 */
function startCli() {
  const child = spawn(process.execPath, ["--import", EXIT_WITH_PARENT, BIN], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  onTestFinished(() => {
    child.kill("SIGKILL");
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  let out = "";
  const facts = new Promise<Facts>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8");
      try {
        resolve(JSON.parse(out) as Facts);
      } catch {
        // not complete yet
      }
    });
    child.once("exit", (code) => reject(new Error(`svc-devnet exited early (${code}): ${out}`)));
  });
  return { child, exited, facts };
}

/** Resolves once nothing answers at `url` any more. */
async function stopsAnswering(url: string): Promise<void> {
  await eventually(
    () =>
      post(url, "eth_chainId").then(
        () => false,
        () => true,
      ),
    {
      describe: `${url} to stop answering`,
    },
  );
}

describe("svc-devnet", () => {
  it("prints the devnet's facts as JSON, serves both chains, and stops everything on SIGTERM", async () => {
    const cli = startCli();
    const facts = await cli.facts;
    const { child, exited } = cli;

    expect(facts.evm.chainId).toBe(31337);
    expect(facts.evm.usdc).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(facts.treasury.evm.privateKey).toMatch(/^0x[0-9a-f]{64}$/);
    expect(facts.treasury.solana.secretKey).toHaveLength(64);
    expect(await post(facts.evm.rpcUrl, "eth_chainId")).toBe("0x7a69");
    expect(await post(facts.solana.rpcUrl, "getHealth")).toBe("ok");

    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    await expect(post(facts.evm.rpcUrl, "eth_chainId")).rejects.toThrow();
    await expect(post(facts.solana.rpcUrl, "getHealth")).rejects.toThrow();
  });

  it("leaves no anvil behind when the process that started it is killed outright", async () => {
    const { child, exited, facts } = startCli();
    const { rpcUrl } = (await facts).evm;
    expect(await post(rpcUrl, "eth_chainId")).toBe("0x7a69");
    child.kill("SIGKILL");
    await exited;
    await stopsAnswering(rpcUrl);
  });

  it.each(["--evm-port", "--solana-port"])(
    "with %s taken: one line saying so, and exit 1 (it hung 60 s, or crashed with a stack)",
    async (option) => {
      const taken = net.createServer();
      await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
      const port = (taken.address() as net.AddressInfo).port;
      try {
        const child = spawn(process.execPath, ["--import", EXIT_WITH_PARENT, BIN, option, String(port)], {
          stdio: ["pipe", "pipe", "pipe"],
        });
        onTestFinished(() => {
          child.kill("SIGKILL");
        });
        let stderr = "";
        child.stderr.on("data", (chunk: Buffer) => {
          stderr += chunk.toString("utf8");
        });
        const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
        expect(code).toBe(1);
        const lines = stderr.trimEnd().split("\n");
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^svc-devnet: .*(Address already in use|EADDRINUSE)/);
      } finally {
        taken.close();
      }
    },
  );
});
