/**
 * `work` over `items` with at most `limit` calls in flight at once; the results in the order of `items`.
 * The one way the service bounds its concurrency (public RPC endpoints rate-limit bursts).
 * @example const blocks = await mapLimited(numbers, 8, (n) => client.getBlock({ blockNumber: n }));
 */
export async function mapLimited<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const at = next++;
      results[at] = await work(items[at] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}
