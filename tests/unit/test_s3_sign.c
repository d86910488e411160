/*
 * SigV4 for S3 (registry/storage/s3_sign.c) against AWS's published examples: the signing-key derivation of the
 * General Reference, the "GET Object" header-signed example and the presigned GET URL of "Authenticating
 * Requests: Using Query Parameters" (examplebucket/test.txt, 2013-05-24, 86400 s). The gateway test
 * (integration_s3_client) shows the same URLs work against Ceph RGW.
 */
#include "registry/storage/s3_sign.h"
#include "tap.h"

#include <string.h>

int main(void)
{
    unsigned char k[32];
    char hex[65];
    berth_s3_signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam", k);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", k[i]);
    ok(strcmp(hex, "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d") == 0,
       "signing key of AWS's derivation example");

    const char *empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    berth_s3_sha256_hex("", 0, hex);
    ok(strcmp(hex, empty) == 0, "sha256 of the empty payload");

    /* S3 "GET Object" example (header-signed, Range: bytes=0-9) */
    char creq[1024];
    snprintf(creq, sizeof(creq),
             "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\nx-amz-content-sha256:%s\n"
             "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n%s",
             empty, empty);
    berth_s3_sha256_hex(creq, strlen(creq), hex);
    ok(strcmp(hex, "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972") == 0,
       "canonical request hash of GET Object");
    berth_s3_sign_canonical(creq, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", "20130524T000000Z", hex);
    ok(strcmp(hex, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41") == 0, "signature of GET Object");

    /* the presigned GET example */
    char url[2048];
    berth_s3_presign_t p = {.method = "GET",
                            .scheme = "https",
                            .host = "examplebucket.s3.amazonaws.com",
                            .path = "/test.txt",
                            .access_key = "AKIAIOSFODNN7EXAMPLE",
                            .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                            .region = "us-east-1",
                            .now = 1369353600, /* 2013-05-24T00:00:00Z */
                            .expires = 86400};
    ok(berth_s3_presign_url(&p, url, sizeof(url)) == 0 &&
           strcmp(url,
                  "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
                  "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z"
                  "&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
                  "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404") == 0,
       "presigned GET URL of the S3 documentation: %s", url);
    p.expires = 86401;
    ok(berth_s3_presign_url(&p, url, sizeof(url)) == 0 &&
           strstr(url, "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404") == NULL,
       "another expiry signs differently");
    ok(berth_s3_presign_url(&p, url, 100) == -1, "a buffer too small is refused, not cut");

    char enc[64];
    ok(berth_s3_uri_encode("a b/c~d+e=", 1, enc, sizeof(enc)) == 0 && strcmp(enc, "a%20b/c~d%2Be%3D") == 0,
       "path encoding keeps / and ~");
    ok(berth_s3_uri_encode("a/b", 0, enc, sizeof(enc)) == 0 && strcmp(enc, "a%2Fb") == 0, "query encoding escapes /");
    ok(berth_s3_uri_encode("\xc3\xa9", 0, enc, sizeof(enc)) == 0 && strcmp(enc, "%C3%A9") == 0, "UTF-8 bytes in upper-case hex");
    ok(berth_s3_uri_encode("abcdef", 0, enc, 6) == -1, "encoding into a buffer too small fails");
    return tap_done();
}
