/* The HPC image gateway's SQL (sqfs_jobs, migration 0150): statements run with berth_db_api (sql/api.h). */
#ifndef BERTH_SQL_GATEWAY_H
#define BERTH_SQL_GATEWAY_H

/* A job as the REST API shows it (the artifact's "squashfs" and GET …/artifacts/{ref}/squashfs); `j` a sqfs_jobs row */
#define BERTH_SQL_SQFS_JOB_JSON                                                                                                    \
    "json_build_object('status', j.status, 'progress', j.progress, 'reason', j.reason, 'attempts', j.attempts, "                   \
    "'source_digest', j.digest, 'artifact_digest', j.artifact_digest, 'digest', j.blob_digest, 'size', j.size, "                   \
    "'uncompressed_size', j.content_bytes, 'compression', j.compression, 'isa_level', j.isa_level, 'published_path', "             \
    "j.published_path, 'seconds', j.seconds, 'creation_time', j.created_at, 'update_time', j.updated_at)"

#endif
