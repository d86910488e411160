/*
 * How many upload bodies one principal and one client address may stream at once. The upload listener has a
 * thread per connection and a fixed number of them (uploads.max_connections): without a share per caller, one
 * user with push rights holding slow bodies open fills it and nobody else can push.
 */
#ifndef BERTH_SERVICE_UPLOAD_LIMITS_H
#define BERTH_SERVICE_UPLOAD_LIMITS_H

/**
 * Set the shares (uploads.max_per_principal, uploads.max_per_address) for a listener of `max_streams`
 * connections (uploads.max_connections), and how many bodies may stream at once in all (`max_total`; 0: as many
 * as the listener has connections); once, before the upload server starts. A principal's share is at most half of
 * the streams in all (at least one). Unconfigured: no limits.
 */
void berth_upload_limits_configure(int per_principal, int per_address, int max_streams, int max_total);

/**
 * Take one slot for `principal` ("" anonymous: only the address counts) and `address` ("" or NULL: unknown, only
 * the principal counts). 0, or BERTH_ERETRY when either is at its share or all streams are taken (nothing taken).
 */
int berth_upload_limits_acquire(const char *principal, const char *address);

/** Give back a slot taken by berth_upload_limits_acquire with the same arguments. */
void berth_upload_limits_release(const char *principal, const char *address);

#endif
