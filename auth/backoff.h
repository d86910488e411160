/*
 * Back-off for online password guessing. After BERTH_BACKOFF_FREE wrong passwords for one account name from one
 * client address, further attempts are refused unverified for 1, 2, 4 … 300 seconds.
 *
 * The key is the case-folded name plus the address, stored whole in a bounded table with LRU eviction: spelling a
 * name differently buys no guesses (LDAP compares names case-insensitively), two names never share an entry
 * (a hashed slot table let one name's failures reset another's), and one address cannot lock a name out for
 * everybody else after a few typos. A second entry per name counts failures from every address, with
 * BERTH_BACKOFF_FREE_ANY free: guessing from many addresses at once gains a bounded number of guesses. A success
 * clears both.
 */
#ifndef BERTH_AUTH_BACKOFF_H
#define BERTH_AUTH_BACKOFF_H

#define BERTH_BACKOFF_FREE 5
#define BERTH_BACKOFF_FREE_ANY 25
#define BERTH_BACKOFF_MAX_SECONDS 300
#define BERTH_BACKOFF_ENTRIES 4096

/** Seconds (name, remote) must still wait before its next attempt is verified (the longer of its own and the
 * name's all-addresses back-off); 0 when it may try now. */
long berth_backoff_wait(const char *name, const char *remote);
/** Record an attempt: a success clears the entry, a failure counts towards the back-off. */
void berth_backoff_record(const char *name, const char *remote, int ok);
/** Entries held (for tests). */
int berth_backoff_size(void);

#endif
