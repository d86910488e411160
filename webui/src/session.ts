// Who is signed in: GET /users/current (anonymous visitors get null and see public projects read-only).
import { signal } from "@preact/signals";
import { ApiError, get, login, logout, sessionRestored } from "./api";

export interface User {
  user_id: number;
  username: string;
  email?: string;
  realname?: string;
  sysadmin_flag: boolean;
}

export const me = signal<User | null>(null);
export const ready = signal(false);

export async function loadMe() {
  try {
    me.value = await get<User>("/users/current", { quiet401: true });
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 401) throw e;
    me.value = null;
  } finally {
    ready.value = true;
  }
}

export async function signIn(user: string, password: string) {
  const r = await login(user, password);
  me.value = await get<User>("/users/current", { quiet401: true });
  sessionRestored(r.csrf_token);
}

export async function signOut() {
  await logout();
  me.value = null;
}
