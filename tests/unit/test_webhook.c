/*
 * Webhooks (webhook/webhook.h) without a network: the signature a receiver recomputes (a vector computed
 * independently with Python's hmac), the event types the API accepts, and the target addresses it refuses.
 */
#include <stdio.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "webhook/webhook.h"

int main(void)
{
    char sig[72], key[65];
    memset(key, 'k', 64);
    key[64] = '\0';
    const char *body = "{\"type\":\"PUSH_ARTIFACT\"}";
    berth_webhook_sign(sig, key, "1700000000", body, strlen(body));
    ok(strcmp(sig, "sha256=9c44a39396de523cab9357406376d0d04204cf74f818730cc831c31b2533cd1d") == 0,
       "X-Berth-Signature is sha256=hex(HMAC-SHA256(secret, timestamp \".\" body))");
    berth_webhook_sign(sig, key, "1700000001", body, strlen(body));
    ok(strcmp(sig, "sha256=9c44a39396de523cab9357406376d0d04204cf74f818730cc831c31b2533cd1d") != 0,
       "the timestamp is signed: a replayed body with a new timestamp does not verify");

    static const char *const types[] = {"PUSH_ARTIFACT", "PULL_ARTIFACT", "DELETE_ARTIFACT", "QUOTA_EXCEED",
                                        "QUOTA_WARNING", "TAG_RETENTION", "REPLICATION",     "ISA_SCAN_COMPLETED"};
    int all = 1;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        all &= berth_webhook_event_type_known(types[i]);
    ok(all, "the issue's eight event types are known");
    ok(!berth_webhook_event_type_known("push_artifact") && !berth_webhook_event_type_known("") &&
           !berth_webhook_event_type_known("SCANNING_FAILED"),
       "others are not (case matters, as in Harbor)");

    ok(berth_webhook_address_ok("http://127.0.0.1:8080/hook") && berth_webhook_address_ok("HTTPS://ci.example/x?y=1"),
       "http and https targets");
    static const char *const bad[] = {"file:///etc/passwd", "gopher://h:70/_x",  "ftp://h/",  "http://",
                                      "https://",           "dict://h:11211/",   "//h/x",     "h/x",
                                      "http://a b/",        "http://h/\r\nX: y", "ldap://h/", ""};
    int refused = 1;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (berth_webhook_address_ok(bad[i])) {
            refused = 0;
            printf("# accepted: %s\n", bad[i]);
        }
    ok(refused, "other schemes, empty hosts, spaces and control bytes are refused");

    /* what a policy may store (the API's check): also no credentials, a real port, a bounded length */
    ok(berth_webhook_address_refused("https://ci.example:8443/hooks/berth?x=1") == NULL &&
           berth_webhook_address_refused("http://[::1]:8080/") == NULL,
       "ordinary targets may be stored");
    char longer[2100];
    memset(longer, 'a', sizeof(longer) - 1);
    memcpy(longer, "http://h/", 9);
    longer[sizeof(longer) - 1] = '\0';
    const char *const unstored[] = {"http://user:pw@h/", "https://user@h/",    "http://:pw@h/", "http://h:99999/",
                                    "http://h:x/",       "file:///etc/passwd", longer};
    int all_refused = 1;
    for (size_t i = 0; i < sizeof(unstored) / sizeof(unstored[0]); i++)
        if (berth_webhook_address_refused(unstored[i]) == NULL) {
            all_refused = 0;
            printf("# stored: %.60s\n", unstored[i]);
        }
    ok(all_refused, "credentials in the URL, bad ports, other schemes and 2 KiB+ addresses are refused");
    return tap_done();
}
