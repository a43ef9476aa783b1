/**
 * The event feed, newest first. The API reads events oldest first after a cursor: the page reads up to the
 * present once, keeps the latest ones, then polls from the cursor every 2.5 s, so new events appear
 * without a reload.
 */
import type { EventType, SvcEvent } from "@svc/sdk";
import { EVENT_TYPES } from "@svc/sdk";
import { useState } from "react";
import { describeEvent, eventWalletId } from "../events.ts";
import { formatRelative, formatTime } from "../format.ts";
import { EVENTS_POLL_MS } from "../polls.ts";
import { Link } from "../router.tsx";
import { svc } from "../session.ts";
import { Empty, ErrorNotice, Loading } from "../ui/feedback.tsx";
import { useResource } from "../ui/resource.ts";

/** How many events the feed keeps on screen. */
const KEEP = 200;
/** At most this many pages are read to catch up at first (100 events each). */
const CATCH_UP_PAGES = 50;

interface Feed {
  events: SvcEvent[];
  cursor: string | undefined;
  /** The names of the wallets the events are about, by id: read again when an event names one not in it. */
  walletNames: ReadonlyMap<string, string>;
}

export function EventsPage() {
  const [type, setType] = useState<EventType | "">("");
  return (
    <section>
      <div className="heading">
        <h1>Events</h1>
        <label>
          Type
          <select value={type} onChange={(e) => setType(e.target.value as EventType | "")}>
            <option value="">All</option>
            {EVENT_TYPES.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
      </div>
      <p className="hint">Live: new events appear here within a few seconds.</p>
      {/* A new filter is a new feed. */}
      <EventFeed key={type} type={type} />
    </section>
  );
}

function EventFeed(props: { type: EventType | "" }) {
  const { type } = props;
  const [feed, setFeed] = useState<Feed>({ events: [], cursor: undefined, walletNames: new Map() });
  const [caughtUp, setCaughtUp] = useState(false);
  const poll = useResource(
    async () => {
      let { cursor, events } = feed;
      let pages = 0;
      for (;;) {
        const page = await svc().events.list({
          limit: 100,
          ...(cursor ? { after: cursor } : {}),
          ...(type ? { type } : {}),
        });
        cursor = page.nextCursor;
        events = [...page.data.slice().reverse(), ...events].slice(0, KEEP);
        pages += 1;
        if (page.data.length < 100 || pages >= CATCH_UP_PAGES) break;
      }
      let walletNames = feed.walletNames;
      const unnamed = (event: SvcEvent) => {
        const walletId = eventWalletId(event);
        return walletId !== undefined && !walletNames.has(walletId);
      };
      // The list holds archived wallets too: only a wallet made since the last read is missing from it.
      if (events.some(unnamed)) {
        const wallets = await svc().wallet.list();
        walletNames = new Map(wallets.map((wallet) => [wallet.id, wallet.name]));
      }
      setFeed({ events, cursor, walletNames });
      setCaughtUp(true);
      return events.length;
    },
    [feed.cursor],
    { intervalMs: EVENTS_POLL_MS },
  );

  return (
    <>
      <ErrorNotice error={poll.error} />
      {!caughtUp && <Loading label="Loading events…" />}
      {caughtUp && feed.events.length === 0 && <Empty>No events{type ? ` of type ${type}` : ""} yet.</Empty>}
      {feed.events.length > 0 && (
        <ol className="feed" aria-label="Events, newest first">
          {feed.events.map((event) => {
            const walletId = eventWalletId(event);
            return (
              <li key={event.id}>
                <span className="event-type">{event.type}</span>
                <span className="event-what">{describeEvent(event)}</span>
                <span className="event-meta">
                  {walletId && (
                    <Link to={`/wallets/${walletId}`}>{feed.walletNames.get(walletId) ?? "wallet"}</Link>
                  )}{" "}
                  <time dateTime={event.createdAt} title={formatTime(event.createdAt)}>
                    {formatRelative(event.createdAt)}
                  </time>
                </span>
              </li>
            );
          })}
        </ol>
      )}
    </>
  );
}
