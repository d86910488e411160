/*
 * Endpoint secrets at rest: AES-256-GCM under the key in replication.key_file (32 random bytes, generated mode 0600
 * on first start). A sealed secret is the hex of nonce(12) || ciphertext || tag(16); the registries table stores it.
 * berth_repl_seal and berth_repl_open are declared in replication.h (the REST API seals what it is given).
 */
#ifndef BERTH_REPLICATION_SEAL_H
#define BERTH_REPLICATION_SEAL_H

/**
 * Read the key at `path`, or generate it there when the file does not exist. 0, or BERTH_ERROR when the file is
 * unreadable or shorter than 32 bytes (it is never replaced then: that would lose every sealed secret).
 */
int berth_repl_seal_load_key(const char *path);
/**
 * A secret every berthd sharing the key derives alike: hex of HMAC-SHA256(key, label) into out[65] (after
 * berth_repl_seal_load_key). Several instances on one database use it for what they must agree on without
 * storing it (the password of the berth-replication system user).
 */
void berth_repl_seal_derive(const char *label, char out[65]);

#endif
