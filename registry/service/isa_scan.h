/*
 * The ISA scanner job (design brief (f)): after an ISA index is pushed, each variant's layers are read (tar with
 * gzip or zstd, whiteouts applied), every ELF file is analysed (registry/isa/scan.h), and a verdict — pass, warn
 * (runtime-dispatched code or an under-built variant), fail (an instruction above the declared level, named by
 * function) — is stored in isa_scans and pushed as a referrer artifact of the variant
 * (artifactType application/vnd.berth.isa.scan.v1+json). One thread of its own: scans never delay requests.
 */
#ifndef BERTH_SERVICE_ISA_SCAN_H
#define BERTH_SERVICE_ISA_SCAN_H

#include "registry/service/registry.h"

#define BERTH_ISA_SCAN_ARTIFACT_TYPE "application/vnd.berth.isa.scan.v1+json"

int berth_isa_scan_start(berth_registry_t *reg);
void berth_isa_scan_stop(void);
/** Queue a scan of every variant in `rows` (the index's variant rows as JSON) of `repo`. Never blocks. */
void berth_isa_scan_enqueue(const char *repo, const char *rows);
/** Scan one variant now (the job's body; blocking). `declared_level` and `declared_features` as in the rows. */
int berth_isa_scan_variant(berth_registry_t *reg, const char *repo, const char *digest, const char *declared_level,
                           const char *declared_features, char status_out[12]);

#endif
