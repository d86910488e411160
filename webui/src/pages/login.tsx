// Sign in: a page (/login?next=…) and the same form in a dialog when a session expires mid-page.
import { useState } from "preact/hooks";
import { get, loginErrorText } from "../api";
import { navigate } from "../router";
import { me, signIn } from "../session";
import { useLoad } from "../ui/states";

/** Which accounts sign in here, from what /systeminfo tells anyone (auth_mode). */
export function accountsText(authMode: string | undefined): string {
  if (authMode === "ldap_auth") return "Your directory (LDAP) account, or a local Berth account.";
  if (authMode === "db_auth") return "Your Berth account.";
  return "Local or LDAP account.";
}

export function LoginForm({ onDone, idPrefix = "login" }: { onDone: () => void; idPrefix?: string }) {
  const [user, setUser] = useState("");
  const [pw, setPw] = useState("");
  const [err, setErr] = useState("");
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setErr("");
    try {
      await signIn(user.trim(), pw);
      setPw("");
      onDone();
    } catch (x) {
      setErr(loginErrorText(x));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="login-form" onSubmit={submit} aria-describedby={err ? `${idPrefix}-error` : undefined}>
      <label for={`${idPrefix}-user`}>Username</label>
      <input id={`${idPrefix}-user`} name="username" autocomplete="username" required value={user} onInput={(e) => setUser((e.target as HTMLInputElement).value)} />
      <label for={`${idPrefix}-password`}>Password</label>
      <input
        id={`${idPrefix}-password`}
        name="password"
        type="password"
        autocomplete="current-password"
        required
        value={pw}
        onInput={(e) => setPw((e.target as HTMLInputElement).value)}
      />
      {err && (
        <p class="form-error" id={`${idPrefix}-error`} role="alert">
          {err}
        </p>
      )}
      <button type="submit" class="btn primary" disabled={busy}>
        {busy ? "Signing in…" : "Sign in"}
      </button>
    </form>
  );
}

/** Only same-site paths are followed after sign-in (no open redirect through ?next=). */
export function safeNext(next: string | null): string {
  return next && next.startsWith("/") && !next.startsWith("//") && !next.startsWith("/login") ? next : "/projects";
}

export function LoginPage({ search }: { search: string }) {
  const next = safeNext(new URLSearchParams(search).get("next"));
  const info = useLoad("login-sysinfo", () => get<{ auth_mode: string }>("/systeminfo", { quiet401: true }));
  return (
    <main id="main" class="login-page">
      <div class="card login-card">
        <h1>Sign in to Berth</h1>
        <p class="muted">{accountsText(info.data?.auth_mode)} Robot accounts use the registry API, not this page.</p>
        {me.value && (
          <p role="status">
            You are signed in as <strong>{me.value.username}</strong>. <a href={next}>Carry on</a>, or sign in as someone else.
          </p>
        )}
        <LoginForm onDone={() => navigate(next, true)} />
        <p class="muted">
          <a href="/projects">Browse public projects without signing in</a>
        </p>
      </div>
    </main>
  );
}
