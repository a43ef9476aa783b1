import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { DevnetInfo } from "@svc/devnet";
import pino, { type Logger } from "pino";
import { AccessTokens } from "./accounts/access-tokens.ts";
import { LoginDevices } from "./accounts/login-devices.ts";
import { createApp } from "./app.ts";
import { AuthzdClient } from "./authzd/client.ts";
import { type ChainRegistry, createChainRegistry } from "./chains/registry.ts";
import { sweepEvents } from "./events/events.ts";
import { Faucet, type FaucetAccounts } from "./faucet/faucet.ts";
import type { App } from "./http/types.ts";
import { sweepIdempotencyKeys } from "./idempotency/idempotency.ts";
import { type Config, ConfigError } from "./internal/config.ts";
import { newKey, randomBase62 } from "./internal/crypto.ts";
import { lockDataDir } from "./internal/data-dir-lock.ts";
import { type ClaimLostError, openStore, type Store, type StoreLocation } from "./internal/db/store.ts";
import { loggerOptions } from "./internal/logging.ts";
import { ensurePrivateDir, restrictTree, restrictUmask } from "./internal/private-files.ts";
import {
  FailoverRateLimiter,
  MemoryRateLimiter,
  type RateLimiter,
  RedisRateLimiter,
} from "./internal/rate-limit.ts";
import { forgetRestartedChains, type LocalChains, openLocalChains, startsOwnChains } from "./local-chains.ts";
import { IncomingWatcher } from "./receives/watcher.ts";
import { Confirmer } from "./spends/confirmer.ts";
import { Keyring } from "./wallets/keyring.ts";
import { WebhookDeliverer } from "./webhooks/delivery.ts";
import { OutboundFetcher } from "./x402/outbound-fetch.ts";

/** How long a webhook receiver has to answer one delivery. */
const WEBHOOK_TIMEOUT_MS = 10_000;
/** How often what is kept for a while (finished Idempotency-Keys, events) is swept. */
const SWEEP_EVERY_MS = 3_600_000;

/** A running service: its address, its parts for tests, and how to stop it. */
export interface RunningService {
  app: App;
  url: string;
  store: Store;
  keyring: Keyring;
  /** Settles pending spends; tests run passes by hand with a long interval. */
  confirmer: Confirmer;
  /** Sends events to webhook endpoints. */
  webhooks: WebhookDeliverer;
  close(): Promise<void>;
}

export interface StartOptions {
  /** Overrides where the store lives (tests use PGlite in memory). */
  store?: StoreLocation;
  /** Where log lines go; default stdout. */
  logDestination?: pino.DestinationStream;
  /**
   * Local chains already running, for the devnet profile without RPC URLs (tests share one devnet per
   * file). Without it that configuration starts its own devnet and stops it on close.
   */
  devnet?: DevnetInfo;
  /** The clock of expiries and windows (see {@link Services.now}); default the system clock. */
  now?: () => Date;
  /**
   * Serve the local x402 demo on the devnet profile's local chains. Default: when the service starts
   * those chains itself (`npm start`), not when handed a devnet.
   */
  x402Demo?: boolean;
  /**
   * Told when the service has stopped itself, no longer safe to run: its store's claim for its chains was
   * lost to another instance ({@link ClaimLostError}). `npm start` exits; default: the log line alone.
   */
  onStopped?: (reason: Error) => void;
}

/**
 * The composition root: opens the store, checks the master key, builds the limiter, chains and routes, and
 * listens.
 * @example
 * const service = await startService(loadConfig());
 * console.log(service.url);
 */
export async function startService(config: Config, options: StartOptions = {}): Promise<RunningService> {
  const logger = pino(loggerOptions(config.logLevel), options.logDestination ?? pino.destination(1));
  const dataDir = resolve(config.dataDir);
  const location: StoreLocation =
    options.store ??
    (config.databaseUrl ? { databaseUrl: config.databaseUrl } : { pgliteDir: join(dataDir, "pg") });
  const generatesSecrets = !config.masterKey || !config.jwtSecret;
  const embeddedStore = !options.store && !config.databaseUrl;
  const usesDataDir = generatesSecrets || embeddedStore;
  if (usesDataDir) {
    // Before anything is written there: the directory and all it will hold are the owner's alone.
    restrictUmask();
    ensurePrivateDir(dataDir);
  }
  // The embedded store is one process's: a second service on it would corrupt it.
  const releaseDataDir = embeddedStore ? lockDataDir(dataDir) : () => {};
  let secrets: Secrets;
  let store: Store;
  try {
    secrets = resolveSecrets(config, logger);
    store = await openStore(location);
  } catch (error) {
    releaseDataDir();
    throw error;
  }
  // Until the service is whole, a lost claim waits for it, to stop it once it can be stopped.
  let lostDuringStart: ClaimLostError | undefined;
  let stopForLostClaim = (reason: ClaimLostError) => {
    lostDuringStart = reason;
  };
  let rateLimiter: RateLimiter | undefined;
  let local: LocalChains | undefined;
  let chains: ChainRegistry | undefined;
  let outbound: OutboundFetcher | undefined;
  let webhookOutbound: OutboundFetcher | undefined;
  try {
    if (usesDataDir) restrictTree(dataDir);
    const now = options.now ?? (() => new Date());
    const keyring = new Keyring(secrets.masterKey);
    await keyring.checkAgainst(store.db, secrets.masterKeySource);
    await checkJwtSecret(store, keyring, secrets, logger);
    const nowMs = () => now().getTime();
    rateLimiter = config.redisUrl
      ? new FailoverRateLimiter(new RedisRateLimiter(config.redisUrl), logger, nowMs)
      : new MemoryRateLimiter(nowMs);
    // What the store knows of chains of these names is of another instance's chains, still running, when
    // one serves its own on it, or one serves its own beside it (chains run elsewhere, or its own, under the
    // same names): starting anew would end that instance's spends failed as they land. Claimed before
    // anything starts, so a refused instance starts nothing.
    const ownChains = startsOwnChains(config, options.devnet);
    const claimLost = (error: ClaimLostError) => {
      logger.error({ err: error }, error.message);
      stopForLostClaim(error);
    };
    if (!(await store.claimForChains(ownChains, claimLost)))
      throw new ConfigError(
        ownChains
          ? "another running instance serves chains from this database: a service starting local chains of its own needs a database of its own; run `npx svc-devnet` and point each at it (SVC_RPC_BASE, SVC_RPC_SOLANA, SVC_USDC_BASE, SVC_USDC_SOLANA, and the faucet keys)"
          : "another running instance serves local chains of its own on this database: instances sharing a database share chains; run `npx svc-devnet` and point each at it (SVC_RPC_BASE, SVC_RPC_SOLANA, SVC_USDC_BASE, SVC_USDC_SOLANA, and the faucet keys)",
      );
    local = await openLocalChains(
      config,
      options.devnet,
      options.x402Demo === undefined ? {} : { x402Demo: options.x402Demo },
    );
    if (local?.fresh) await forgetRestartedChains(store.db, Object.keys(local.network.rpcUrls), logger);
    // The devnet profile's discovery defaults to the demo's facilitator.
    const served: Config = {
      ...config,
      x402FacilitatorUrl: config.x402FacilitatorUrl ?? local?.x402Demo?.facilitatorUrl,
    };
    chains = await createChainRegistry(local?.network ?? config.network);
    const registry = chains;
    const chainClient = (name: string) => registry.client(name);
    const faucet = new Faucet({
      db: store.db,
      chains: registry,
      accounts: local?.faucet ?? configuredFaucetAccounts(config),
      caps: {
        usdc: config.network.faucet.dailyUsdc,
        native: config.network.faucet.dailyNative,
        accountUsdc: config.network.faucet.accountDailyUsdc,
        accountNative: config.network.faucet.accountDailyNative,
      },
      log: logger,
    });
    const watcher = new IncomingWatcher(
      { db: store.db, chains: registry, log: logger },
      config.network.watchIntervalMs,
    );
    // What callers name is never one of the service's own backends, whatever SVC_OUTBOUND_ALLOW exempts.
    const backends = [
      ...registry.list().flatMap((chain) => [chain.rpcUrl, ...(chain.wsUrl ? [chain.wsUrl] : [])]),
      ...(config.authzd ? [config.authzd.url] : []),
    ];
    outbound = new OutboundFetcher({
      allow: config.outboundAllow,
      backends,
      timeoutMs: config.x402FetchTimeoutMs,
    });
    // Webhooks pass the same guard, with a short timeout and no redirects (a receiver answers where it was
    // registered; a redirect could lead the signed event anywhere).
    webhookOutbound = new OutboundFetcher({
      allow: config.outboundAllow,
      backends,
      timeoutMs: WEBHOOK_TIMEOUT_MS,
      maxRedirects: 0,
      maxResponseBytes: 1024 * 1024,
    });
    const authzd = config.authzd ? new AuthzdClient(config.authzd, logger) : undefined;
    // Cursors exist before the first request, so nothing paid to a new wallet can fall before them.
    await watcher.initialize();
    const app = await createApp(
      {
        config: served,
        store,
        keyring,
        accessTokens: new AccessTokens(secrets.jwtSecret, now),
        loginDevices: new LoginDevices(secrets.jwtSecret, now),
        chains: registry,
        rateLimiter,
        faucet,
        outbound,
        webhookOutbound,
        authzd,
        now,
      },
      { logger },
    );
    const url = await app.listen({ port: config.port, host: config.host });
    for (const fetcher of [outbound, webhookOutbound]) fetcher.addBackend(url);
    if (local) {
      // Local chains only: their endpoints are worth knowing (to send from outside) and hold no secret.
      const servedChains = registry.list().map(({ name, network, rpcUrl }) => ({ name, network, rpcUrl }));
      logger.info({ chains: servedChains }, "serving the local devnet chains");
    }
    if (local?.x402Demo) {
      const demo = local.x402Demo;
      logger.info(
        { x402Demo: demo },
        `x402 demo: a paid resource at ${demo.url} (v1 twin ${demo.v1Url}), 0.01 USDC on base; pay it with POST /v1/x402/fetch`,
      );
    }
    // Its first pass reconciles whatever a previous process left pending.
    const confirmer = new Confirmer(
      {
        db: store.db,
        keyring,
        chainNames: registry.list().map((chain) => chain.name),
        chainClient,
        log: logger,
        authzd,
        now,
      },
      config.confirmerIntervalMs,
    );
    confirmer.start();
    watcher.start();
    const webhooks = new WebhookDeliverer(
      { db: store.db, keyring, outbound: webhookOutbound, log: logger, now },
      config.webhookPollMs,
    );
    webhooks.start();
    // Finished Idempotency-Keys are kept 24 h, events SVC_EVENT_RETENTION_DAYS, then go: swept at start
    // and every hour. Closing waits for the statement under way and runs no more.
    let sweepsStopped = false;
    let sweeping: Promise<void> = Promise.resolve();
    const sweep = async () => {
      const sweeps = [
        { what: "expired Idempotency-Keys", run: () => sweepIdempotencyKeys(store.db, now()) },
        {
          what: "events past their retention",
          run: () =>
            sweepEvents(store.db, new Date(now().getTime() - config.eventRetentionDays * 86_400_000)),
        },
      ];
      for (const { what, run } of sweeps) {
        if (sweepsStopped) return;
        await run()
          .then((swept) => swept > 0 && logger.info({ swept }, `${what} deleted`))
          .catch((error: unknown) => logger.warn({ err: error }, `could not sweep ${what}; will retry`));
      }
    };
    const sweepNow = () => {
      sweeping = sweep();
    };
    sweepNow();
    const sweeps = setInterval(sweepNow, SWEEP_EVERY_MS);
    sweeps.unref();
    const limiter = rateLimiter;
    const localChains = local;
    const outboundFetcher = outbound;
    const webhookFetcher = webhookOutbound;
    let closing: Promise<void> | undefined;
    const service: RunningService = {
      app,
      url,
      store,
      keyring,
      confirmer,
      webhooks,
      // Once: stopped by itself (a lost claim) and then by its owner, it stops one time.
      close: () => (closing ??= stopParts()),
    };
    const stopParts = async () => {
      clearInterval(sweeps);
      sweepsStopped = true;
      try {
        await webhooks.stop();
        await confirmer.stop();
        await watcher.stop();
        await app.close();
        await webhookFetcher.close();
        await outboundFetcher.close();
        await limiter.close();
        await sweeping;
        await store.close();
      } finally {
        releaseDataDir();
      }
      await registry.close();
      await localChains?.stop();
    };
    stopForLostClaim = (reason) => {
      void service.close().finally(() => options.onStopped?.(reason));
    };
    if (lostDuringStart) stopForLostClaim(lostDuringStart);
    return service;
  } catch (error) {
    try {
      await webhookOutbound?.close();
      await outbound?.close();
      await rateLimiter?.close();
      await store.close();
    } finally {
      releaseDataDir();
    }
    await chains?.close();
    await local?.stop();
    throw error;
  }
}

/**
 * Every instance on one store must sign logins with one JWT secret, or a token one issued is refused by the
 * next (401 at random behind a load balancer). The store records which secret its instances use; a
 * different one is refused while other instances run, and taken as the new one when none does (a rotation:
 * every login issued before ends).
 */
async function checkJwtSecret(
  store: Store,
  keyring: Keyring,
  secrets: Secrets,
  logger: Logger,
): Promise<void> {
  const recorded = await keyring.compareRecordedSecret(store.db, "jwt", secrets.jwtSecret);
  if (recorded !== "different") return;
  if (await store.othersRunning())
    throw new ConfigError(
      `${secrets.jwtSecretSource} is not the JWT secret of the instances running on this database: each would refuse the logins of the others; give every instance the same SVC_JWT_SECRET (and SVC_MASTER_KEY)`,
    );
  await keyring.recordSecret(store.db, "jwt", secrets.jwtSecret);
  logger.warn("the JWT secret is not the one this database's last instances used: logins issued before end");
}

/** The faucet's accounts from the configuration (public test networks, or a devnet run elsewhere). */
function configuredFaucetAccounts(config: Config): FaucetAccounts {
  const { evmPrivateKey, solanaSeed } = config.network.faucet;
  return {
    ...(evmPrivateKey ? { evm: { privateKey: evmPrivateKey } } : {}),
    ...(solanaSeed ? { solana: { privateKey: solanaSeed } } : {}),
  };
}

/** The service's secrets, and where each came from (for a message about one that does not fit the store). */
interface Secrets {
  masterKey: Buffer;
  jwtSecret: string;
  /** `SVC_MASTER_KEY`, or the file it was generated into. */
  masterKeySource: string;
  /** `SVC_JWT_SECRET`, or the file it was generated into. */
  jwtSecretSource: string;
}

/**
 * The master key and JWT secret: from the configuration, or for the embedded default generated once into
 * the data directory (mode 0600) with a warning that this is for local use only.
 */
function resolveSecrets(config: Config, logger: Logger): Secrets {
  const dir = resolve(config.dataDir);
  const fromFile = (name: string, generate: () => string): string => {
    const path = join(dir, name);
    if (!existsSync(path)) {
      ensurePrivateDir(dir);
      writeFileSync(path, generate(), { mode: 0o600, flag: "wx" });
      logger.warn({ path }, `generated ${name} for local use; set it explicitly in production`);
    }
    chmodSync(path, 0o600);
    return readFileSync(path, "utf8").trim();
  };
  const masterKey =
    config.masterKey ??
    Buffer.from(
      fromFile("master.key", () => newKey().toString("base64")),
      "base64",
    );
  if (masterKey.length !== 32)
    throw new ConfigError(`${join(dir, "master.key")} does not hold a 32-byte base64 key`);
  const jwtSecret = config.jwtSecret ?? fromFile("jwt.secret", () => randomBase62(48));
  return {
    masterKey,
    jwtSecret,
    masterKeySource: config.masterKey ? "SVC_MASTER_KEY" : `the master key in ${join(dir, "master.key")}`,
    jwtSecretSource: config.jwtSecret ? "SVC_JWT_SECRET" : `the JWT secret in ${join(dir, "jwt.secret")}`,
  };
}
