// Loading, empty, error and forbidden states every page uses, and a hook that loads data and re-loads it when
// its key changes (the key is the URL it reads, so paging and filters are deep links).
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ApiError } from "../api";

export interface Loaded<T> {
  data: T | null;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

export function useLoad<T>(key: string | null, load: () => Promise<T>): Loaded<T> {
  const [state, setState] = useState<{ data: T | null; error: unknown; loading: boolean; key: string | null }>({
    data: null, error: null, loading: key != null, key: null,
  });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (key == null) return;
    let live = true;
    setState((s) => ({ ...s, loading: true, error: null }));
    load().then(
      (data) => live && setState({ data, error: null, loading: false, key }),
      (error) => live && setState({ data: null, error, loading: false, key }),
    );
    return () => {
      live = false;
    };
  }, [key, tick]);
  return { data: state.data, error: state.error, loading: state.loading, reload: () => setTick((t) => t + 1) };
}

export function Loading({ what = "Loading" }: { what?: string }) {
  return (
    <div class="state loading" role="status" aria-live="polite">
      <span class="spinner" aria-hidden="true" /> {what}…
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="state empty">{children}</div>;
}

export function ErrorBox({ error, retry }: { error: unknown; retry?: () => void }) {
  if (error instanceof ApiError && error.status === 403) return <Forbidden />;
  if (error instanceof ApiError && error.status === 404)
    return <div class="state error" role="alert">Not found, or you may not see it.</div>;
  const msg = error instanceof ApiError ? error.message : error instanceof Error ? error.message : String(error);
  return (
    <div class="state error" role="alert">
      <strong>Something went wrong:</strong> {msg}
      {retry && (
        <button type="button" class="btn" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Forbidden() {
  return (
    <div class="state forbidden" role="alert">
      You do not have permission to see this.
    </div>
  );
}

/** Renders the right state for a Loaded<T>, or its children with the data. */
export function Show<T>({ l, empty, children }: { l: Loaded<T>; empty?: (d: T) => boolean; children: (d: T) => ComponentChildren }) {
  if (l.error) return <ErrorBox error={l.error} retry={l.reload} />;
  if (l.data == null) return <Loading />;
  if (empty && empty(l.data)) return null;
  return <>{children(l.data)}</>;
}

/** Run a change and keep its error for display; `then` runs after success (usually a reload). */
export function useAction(then: () => void = () => {}) {
  const [err, setErr] = useState("");
  const act = async (f: () => Promise<unknown>) => {
    setErr("");
    try {
      await f();
      then();
      return true;
    } catch (x) {
      setErr(x instanceof Error ? x.message : String(x));
      return false;
    }
  };
  return { err, setErr, act };
}

export function FormError({ msg }: { msg: string }) {
  return msg ? (
    <p class="form-error" role="alert">
      {msg}
    </p>
  ) : null;
}

/** A dialog form's Cancel + submit buttons. */
export function FormButtons({ onCancel, submit, busy }: { onCancel: () => void; submit: string; busy?: boolean }) {
  return (
    <div class="actions">
      <button type="button" class="btn" onClick={onCancel}>
        Cancel
      </button>
      <button type="submit" class="btn primary" disabled={busy}>
        {submit}
      </button>
    </div>
  );
}
