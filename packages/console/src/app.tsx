/** The console's frame: the login page without a session; with one, the navigation and the current view. */
import { useEffect } from "react";
import { ApiKeysPage } from "./pages/api-keys.tsx";
import { ApprovalsPage } from "./pages/approvals.tsx";
import { EventsPage } from "./pages/events.tsx";
import { LoginPage } from "./pages/login.tsx";
import { WalletPage } from "./pages/wallet.tsx";
import { WalletsPage } from "./pages/wallets.tsx";
import { WebhooksPage } from "./pages/webhooks.tsx";
import { PENDING_BADGE_POLL_MS } from "./polls.ts";
import { Link, match, navigate, usePath } from "./router.tsx";
import { logOut, svc, useSession } from "./session.ts";
import { useResource } from "./ui/resource.ts";

const SECTIONS = [
  { path: "/wallets", label: "Wallets" },
  { path: "/approvals", label: "Approvals" },
  { path: "/api-keys", label: "API keys" },
  { path: "/webhooks", label: "Webhooks" },
  { path: "/events", label: "Events" },
] as const;

function View(props: { path: string }) {
  const { path } = props;
  const wallet = match("/wallets/:id", path);
  if (wallet) return <WalletPage walletId={wallet.id as string} />;
  if (match("/wallets", path)) return <WalletsPage />;
  if (match("/approvals", path)) return <ApprovalsPage />;
  if (match("/api-keys", path)) return <ApiKeysPage />;
  if (match("/webhooks", path)) return <WebhooksPage />;
  if (match("/events", path)) return <EventsPage />;
  return (
    <section>
      <h1>Not found</h1>
      <p>
        There is no page at <code>{path}</code>. <Link to="/wallets">Go to your wallets</Link>.
      </p>
    </section>
  );
}

/**
 * How many spends wait for approval, beside "Approvals" in the navigation: read every 5 s, and at once when
 * the owner decides one here.
 */
function PendingBadge() {
  const pending = useResource(() => svc().approvals.list(), [], {
    intervalMs: PENDING_BADGE_POLL_MS,
    follows: "approvals",
  });
  const count = pending.data?.length ?? 0;
  if (count === 0) return null;
  return (
    <span className="badge">
      {count}
      <span className="visually-hidden"> waiting</span>
    </span>
  );
}

export function App() {
  const session = useSession();
  const path = usePath();

  useEffect(() => {
    if (session && path === "/") navigate("/wallets");
  }, [session, path]);

  if (!session) return <LoginPage />;
  return (
    <div className="frame">
      <header className="top">
        <a className="brand" href="#/wallets">
          Svc
        </a>
        <nav aria-label="Sections">
          {SECTIONS.map((section) => (
            <Link
              key={section.path}
              to={section.path}
              current={path === section.path || path.startsWith(`${section.path}/`)}
            >
              {section.label}
              {section.path === "/approvals" && <PendingBadge />}
            </Link>
          ))}
        </nav>
        <div className="account">
          <span className="email">{session.email}</span>
          <button type="button" className="link" onClick={() => void logOut()}>
            Log out
          </button>
        </div>
      </header>
      <main>
        <View path={path} />
      </main>
    </div>
  );
}
