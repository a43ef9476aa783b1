// Worker entry of verifyAuditFileParallel: scans one byte range and posts the RangeScan back.
import { parentPort, workerData } from "node:worker_threads";
import { scanRangeSync } from "./verify.ts";

const { file, from, to, watchIndex } = workerData as {
  file: string;
  from: number;
  to: number;
  watchIndex: number;
};
parentPort?.postMessage(scanRangeSync(file, from, to, undefined, watchIndex));
