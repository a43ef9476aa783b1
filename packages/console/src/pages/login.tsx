/** Log in, or register and then log in. */
import { type FormEvent, useState } from "react";
import { publicClient, sessionEndReason, signIn } from "../session.ts";
import { ErrorNotice, fieldError } from "../ui/feedback.tsx";
import { useAction } from "../ui/resource.ts";

export function LoginPage() {
  const [mode, setMode] = useState<"login" | "register">("login");
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [name, setName] = useState("");
  const submit = useAction(
    async () => {
      if (mode === "register") {
        await publicClient.auth.register({ email, password, ...(name ? { name } : {}) });
      }
      await signIn(email, password);
    },
    { endSessionOn401: false },
  );
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    void submit.run();
  };
  const switchTo = (next: "login" | "register") => {
    setMode(next);
    submit.clearError();
  };
  const ended = sessionEndReason();
  const passwordError = fieldError(submit.error, "password");
  const emailError = fieldError(submit.error, "email");

  return (
    <main className="login">
      <h1>Svc console</h1>
      <div className="tabs" role="tablist" aria-label="Log in or register">
        <button type="button" role="tab" aria-selected={mode === "login"} onClick={() => switchTo("login")}>
          Log in
        </button>
        <button
          type="button"
          role="tab"
          aria-selected={mode === "register"}
          onClick={() => switchTo("register")}
        >
          Register
        </button>
      </div>
      {ended && mode === "login" && !submit.error && <p className="notice">{ended}</p>}
      <form onSubmit={onSubmit} aria-label={mode === "login" ? "Log in" : "Register"}>
        <label>
          Email
          <input
            type="email"
            name="email"
            autoComplete="username"
            required
            value={email}
            onChange={(e) => setEmail(e.target.value)}
            aria-invalid={emailError ? true : undefined}
          />
          {emailError && <span className="field-error">{emailError}</span>}
        </label>
        {mode === "register" && (
          <label>
            Name <span className="optional">(optional)</span>
            <input
              type="text"
              name="name"
              autoComplete="name"
              value={name}
              onChange={(e) => setName(e.target.value)}
            />
          </label>
        )}
        <label>
          Password
          <input
            type="password"
            name="password"
            autoComplete={mode === "login" ? "current-password" : "new-password"}
            required
            minLength={mode === "register" ? 12 : undefined}
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            aria-invalid={passwordError ? true : undefined}
          />
          {passwordError && <span className="field-error">{passwordError}</span>}
          {mode === "register" && !passwordError && <span className="hint">At least 12 characters.</span>}
        </label>
        <ErrorNotice error={submit.error} />
        <button type="submit" className="primary" disabled={submit.pending}>
          {submit.pending ? "Please wait…" : mode === "login" ? "Log in" : "Create account"}
        </button>
      </form>
    </main>
  );
}
