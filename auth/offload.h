/*
 * Credential work — argon2 password hashing and every LDAP exchange — runs on its own bounded pool of workers
 * (server.auth_workers, server.auth_queue), never on the workers that serve everything else: a storm of bad
 * logins or a hung directory then slows logins only, not pulls, pushes or the API.
 *
 * The worker running a request says whether it may do such work (berth_offload_enter). Credential code asks
 * berth_offload_here() before it starts; when the answer is no, it fails without side effects and the request
 * is run again from the start on the auth pool. That is safe because a request does nothing before it has
 * authenticated its caller. Threads that never call berth_offload_enter (upload connections, replication, start-up)
 * may always do it.
 */
#ifndef BERTH_AUTH_OFFLOAD_H
#define BERTH_AUTH_OFFLOAD_H

/** Before a request runs on this thread: may it hash passwords and talk to LDAP here? */
void berth_offload_enter(int may_do_credential_work);
/** 1: go ahead. 0: not on this thread; the request is marked to move (fail quietly and unwind). */
int berth_offload_here(void);
/** 1 on a thread that may not do credential work (a general worker), without marking anything. */
int berth_offload_forbidden(void);
/** Whether the running request has been marked to move (so a failure need not be logged). */
int berth_offload_moving(void);
/** After the request: 1 when it must be run again on the auth pool. Resets the thread's state. */
int berth_offload_leave(void);

#endif
