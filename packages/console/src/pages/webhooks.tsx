/**
 * Webhook endpoints: the service posts each event to them, signed. Listing, registering one (its signing
 * secret shown once), each endpoint's recent deliveries, giving one a new secret (shown once), and removing
 * one.
 */
import type { CreatedWebhookEndpoint, EventType, RotatedWebhookEndpoint, WebhookEndpoint } from "@svc/sdk";
import { EVENT_TYPES } from "@svc/sdk";
import { type FormEvent, useState } from "react";
import { formatRelative, formatTime } from "../format.ts";
import { svc } from "../session.ts";
import { Empty, ErrorNotice, fieldError, Loading } from "../ui/feedback.tsx";
import { useAction, useResource } from "../ui/resource.ts";
import { ShownOnce } from "../ui/shown-once.tsx";

export function WebhooksPage() {
  const endpoints = useResource(() => svc().webhooks.list(), []);
  const [created, setCreated] = useState<CreatedWebhookEndpoint | undefined>(undefined);
  // Every new secret stays shown until its own "I have copied it": another action never hides one.
  const [rotated, setRotated] = useState<RotatedWebhookEndpoint[]>([]);
  return (
    <section>
      <h1>Webhooks</h1>
      <p className="hint">
        The service posts every event to these URLs, signed per the Standard Webhooks specification; check the
        signature with <code>verifyWebhook</code> from <code>@svc/sdk</code>. The Events page shows the same
        events.
      </p>
      {created && (
        <ShownOnce
          title="Endpoint created"
          secret={created.secret}
          copyLabel="Copy secret"
          onDone={() => setCreated(undefined)}
        >
          Its signing secret, for checking what it receives: <strong>you will not see it again.</strong>
        </ShownOnce>
      )}
      {rotated.map((endpoint) => (
        <RotatedSecret
          key={endpoint.secret}
          endpoint={endpoint}
          onDone={() => setRotated((shown) => shown.filter((other) => other !== endpoint))}
        />
      ))}
      <CreateEndpoint
        onCreated={(endpoint) => {
          setCreated(endpoint);
          endpoints.reload();
        }}
      />
      <h2>Endpoints</h2>
      <ErrorNotice error={endpoints.error} />
      {!endpoints.data && endpoints.loading && <Loading label="Loading endpoints…" />}
      {endpoints.data?.length === 0 && (
        <Empty>No endpoints. Without one, read the Events page or poll the API.</Empty>
      )}
      {endpoints.data && endpoints.data.length > 0 && (
        <ul className="cards single" aria-label="Webhook endpoints">
          {endpoints.data.map((endpoint) => (
            <EndpointCard
              key={endpoint.id}
              endpoint={endpoint}
              onDeleted={endpoints.reload}
              onRotated={(rotation) => setRotated((shown) => [...shown, rotation])}
            />
          ))}
        </ul>
      )}
    </section>
  );
}

function CreateEndpoint(props: { onCreated: (endpoint: CreatedWebhookEndpoint) => void }) {
  const [url, setUrl] = useState("");
  const [description, setDescription] = useState("");
  const [types, setTypes] = useState<ReadonlySet<EventType>>(new Set());
  const create = useAction(async () => {
    const endpoint = await svc().webhooks.create({
      url,
      ...(description ? { description } : {}),
      ...(types.size > 0 ? { events: [...types] } : {}),
    });
    setUrl("");
    setDescription("");
    setTypes(new Set());
    props.onCreated(endpoint);
  });
  const toggle = (type: EventType) =>
    setTypes((previous) => {
      const next = new Set(previous);
      if (next.has(type)) next.delete(type);
      else next.add(type);
      return next;
    });
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    void create.run();
  };
  const urlError = fieldError(create.error, "url");
  return (
    <form className="panel" onSubmit={onSubmit} aria-labelledby="create-endpoint-title">
      <h2 id="create-endpoint-title">Add an endpoint</h2>
      <label>
        URL
        <input
          type="url"
          required
          placeholder="https://example.com/hooks/svc"
          value={url}
          onChange={(e) => setUrl(e.target.value)}
          aria-invalid={urlError ? true : undefined}
        />
        {urlError && <span className="field-error">{urlError}</span>}
      </label>
      <label>
        Description <span className="optional">(optional)</span>
        <input value={description} onChange={(e) => setDescription(e.target.value)} maxLength={200} />
      </label>
      <fieldset>
        <legend>Events to send</legend>
        <p className="hint">{types.size === 0 ? "None chosen: every event." : `${types.size} chosen.`}</p>
        {EVENT_TYPES.map((type) => (
          <label key={type} className="check">
            <input type="checkbox" checked={types.has(type)} onChange={() => toggle(type)} />
            {type}
          </label>
        ))}
      </fieldset>
      <ErrorNotice error={create.error} />
      <button type="submit" className="primary" disabled={create.pending}>
        {create.pending ? "Adding…" : "Add endpoint"}
      </button>
    </form>
  );
}

function EndpointCard(props: {
  endpoint: WebhookEndpoint;
  onDeleted: () => void;
  onRotated: (endpoint: RotatedWebhookEndpoint) => void;
}) {
  const { endpoint } = props;
  const [showDeliveries, setShowDeliveries] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [rotating, setRotating] = useState(false);
  const remove = useAction(async () => {
    await svc().webhooks.delete(endpoint.id);
    props.onDeleted();
  });
  return (
    <li className="card" aria-label={endpoint.url}>
      <div className="card-title">
        <code>{endpoint.url}</code>
      </div>
      {endpoint.description && <p>{endpoint.description}</p>}
      <p className="hint">
        {endpoint.events === null ? "Every event" : endpoint.events.join(", ")} · added{" "}
        {formatTime(endpoint.createdAt)}
      </p>
      <ErrorNotice error={remove.error} />
      <div className="actions">
        <button
          type="button"
          onClick={() => setShowDeliveries(!showDeliveries)}
          aria-expanded={showDeliveries}
        >
          {showDeliveries ? "Hide deliveries" : "Recent deliveries"}
        </button>
        {!rotating && (
          <button type="button" onClick={() => setRotating(true)}>
            New secret…
          </button>
        )}
        {confirming ? (
          <>
            <button
              type="button"
              className="danger"
              onClick={() => void remove.run()}
              disabled={remove.pending}
            >
              Delete {endpoint.url}
            </button>
            <button type="button" onClick={() => setConfirming(false)}>
              Keep
            </button>
          </>
        ) : (
          <button type="button" className="danger" onClick={() => setConfirming(true)}>
            Delete…
          </button>
        )}
      </div>
      {rotating && (
        <RotateSecret
          endpoint={endpoint}
          onCancel={() => setRotating(false)}
          onRotated={(rotation) => {
            setRotating(false);
            props.onRotated(rotation);
          }}
        />
      )}
      {showDeliveries && <Deliveries endpointId={endpoint.id} />}
    </li>
  );
}

/** How long the replaced secret keeps signing beside the new one, as the owner chooses it. */
const PREVIOUS_SECRET_CHOICES = [
  {
    seconds: 86_400,
    label: "Sign with the old secret too for a day, while the receiver moves to the new one",
  },
  {
    seconds: 0,
    label: "Stop the old secret now (it leaked): deliveries fail until the receiver has the new one",
  },
] as const;

/** Asks how the endpoint's secret is replaced, then replaces it. */
function RotateSecret(props: {
  endpoint: WebhookEndpoint;
  onCancel: () => void;
  onRotated: (endpoint: RotatedWebhookEndpoint) => void;
}) {
  const [previousSecretValidForSeconds, setPrevious] = useState<number>(PREVIOUS_SECRET_CHOICES[0].seconds);
  const rotate = useAction(async () => {
    props.onRotated(await svc().webhooks.rotateSecret(props.endpoint.id, { previousSecretValidForSeconds }));
  });
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    void rotate.run();
  };
  return (
    <form className="rotate-secret" onSubmit={onSubmit} aria-label={`New secret for ${props.endpoint.url}`}>
      <fieldset>
        <legend>The secret it replaces</legend>
        {PREVIOUS_SECRET_CHOICES.map((choice) => (
          <label key={choice.seconds} className="check block">
            <input
              type="radio"
              name={`previous-secret-${props.endpoint.id}`}
              checked={previousSecretValidForSeconds === choice.seconds}
              onChange={() => setPrevious(choice.seconds)}
            />
            {choice.label}
          </label>
        ))}
      </fieldset>
      <ErrorNotice error={rotate.error} />
      <div className="actions">
        <button type="submit" className="primary" disabled={rotate.pending}>
          {rotate.pending ? "Making a new secret…" : "Make a new secret"}
        </button>
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** An endpoint's new signing secret, shown this once. */
function RotatedSecret(props: { endpoint: RotatedWebhookEndpoint; onDone: () => void }) {
  const { endpoint } = props;
  return (
    <ShownOnce
      title={`New secret for ${endpoint.url}`}
      secret={endpoint.secret}
      copyLabel="Copy secret"
      onDone={props.onDone}
    >
      Give it to the receiver now: <strong>you will not see it again.</strong>{" "}
      {endpoint.previousSecretExpiresAt === null
        ? "The old secret no longer signs deliveries."
        : `Deliveries carry the old secret's signature too until ${formatTime(endpoint.previousSecretExpiresAt)}.`}
    </ShownOnce>
  );
}

function Deliveries(props: { endpointId: string }) {
  const deliveries = useResource(
    () => svc().webhooks.deliveries(props.endpointId, { limit: 20 }),
    [props.endpointId],
    {
      intervalMs: 5000,
    },
  );
  if (!deliveries.data) {
    return deliveries.loading ? (
      <Loading label="Loading deliveries…" />
    ) : (
      <ErrorNotice error={deliveries.error} />
    );
  }
  if (deliveries.data.length === 0) return <Empty>Nothing delivered yet.</Empty>;
  return (
    <div className="table-wrap">
      <table aria-label="Deliveries">
        <thead>
          <tr>
            <th scope="col">Event</th>
            <th scope="col">Attempt</th>
            <th scope="col">Result</th>
            <th scope="col">When</th>
          </tr>
        </thead>
        <tbody>
          {deliveries.data.map((d) => (
            <tr key={`${d.eventId}:${d.attempt}:${d.at}`}>
              <td>
                <code>{d.eventId}</code>
              </td>
              <td>
                {d.attempt}
                {d.redelivery ? " (redelivery)" : ""}
              </td>
              <td>
                <span className={`status status-${d.status === "succeeded" ? "confirmed" : "failed"}`}>
                  {d.status.replace("_", " ")}
                </span>
                {d.responseStatus !== null && <span className="hint">HTTP {d.responseStatus}</span>}
                {d.error && <span className="hint">{d.error}</span>}
              </td>
              <td>
                <time dateTime={d.at} title={formatTime(d.at)}>
                  {formatRelative(d.at)}
                </time>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
