// What the caller may do, from GET /users/current/permissions?scope=/project/<name> (Harbor's resource/action
// pairs). Controls a caller cannot use are hidden or disabled from this, never guessed from the role name.

export interface Permission {
  resource: string;
  action: string;
}

export class Perms {
  private set: Set<string>;
  constructor(list: Permission[] = [], readonly sysadmin = false) {
    this.set = new Set(list.map((p) => `${p.resource}:${p.action}`));
  }
  can(resource: string, action: string): boolean {
    return this.sysadmin || this.set.has(`${resource}:${action}`);
  }
  /** Robot permission picker: only what the caller holds may be granted (the server refuses the rest). */
  grantable(candidates: Permission[]): Permission[] {
    return candidates.filter((p) => this.can(p.resource, p.action));
  }
  get size(): number {
    return this.set.size;
  }
}

/** Everything a project robot may be granted, in Harbor's names. */
export const ROBOT_PERMISSIONS: Permission[] = [
  { resource: "repository", action: "pull" },
  { resource: "repository", action: "push" },
  { resource: "repository", action: "delete" },
  { resource: "repository", action: "list" },
  { resource: "artifact", action: "read" },
  { resource: "artifact", action: "list" },
  { resource: "artifact", action: "delete" },
  { resource: "tag", action: "create" },
  { resource: "tag", action: "delete" },
  { resource: "tag", action: "list" },
];
