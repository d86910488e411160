-- A scan verdict belongs to an index entry's declaration, not to the manifest digest alone (issue #10): the same
-- manifest declared x86-64-v2 in one index and x86-64-v4 in another must keep a fail for the first and a pass for
-- the second, or isa_require_scan_pass serves AVX-512 code to a v2 node. The verdict is a function of the bytes
-- and the declaration, so the key is (manifest digest, declared level, declared features); each entry of
-- isa_variants finds its own verdict by its (digest, level, features).
ALTER TABLE isa_scans ADD COLUMN declared_features text NOT NULL DEFAULT '';

-- Old rows were overwritten by whichever declaration was scanned last and did not record the features. Keep a row
-- only when every entry naming its digest declares one and the same (level, features), which is then the
-- declaration it was scanned under; the rest are dropped and rescanned at the next start (pending until then).
UPDATE isa_scans s SET declared_features = d.features
FROM (SELECT digest, min(level) AS level, min(features) AS features FROM isa_variants GROUP BY digest
      HAVING count(DISTINCT (level, features)) = 1) d
WHERE d.digest = s.digest AND d.level = s.declared_level;
DELETE FROM isa_scans s WHERE NOT EXISTS (
    SELECT 1 FROM isa_variants v WHERE v.digest = s.digest AND v.level = s.declared_level AND v.features = s.declared_features)
    OR s.digest IN (SELECT digest FROM isa_variants GROUP BY digest HAVING count(DISTINCT (level, features)) > 1);

ALTER TABLE isa_scans DROP CONSTRAINT isa_scans_pkey;
ALTER TABLE isa_scans ADD PRIMARY KEY (digest, declared_level, declared_features);
