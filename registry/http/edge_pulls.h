/*
 * The manifest pulls the edge answers itself (a kept decision, edge_blobs.h) reach the audit log through a file:
 * nginx writes a line per such GET to <run_dir>/pulls/pulls.log (the client's address, who in hex, the digest,
 * the URI; the directory is berthd's alone: the lines name users and addresses). Every second berthd moves the
 * file aside and asks nginx to reopen its logs (SIGUSR1); two periods later, when nginx has long written to a new
 * file, it removes the moved one and reads it into berth_audit_pull (removed first: a line is audited at most
 * once). A file is never moved onto one not yet read. Lines a berthd that died left are read at the next start;
 * at a stop the moving ends before the edge is asked to stop, and what it wrote is read once it has.
 */
#ifndef BERTH_HTTP_EDGE_PULLS_H
#define BERTH_HTTP_EDGE_PULLS_H

#include <stddef.h>
#include <sys/types.h>

/** The file nginx writes, below run_dir */
#define BERTH_EDGE_PULLS_DIR "pulls"
#define BERTH_EDGE_PULLS_LOG "pulls.log"

/** Read what an earlier run left in `run_dir`, then start the thread that reads the edge's lines. 0 or -1. */
int berth_edge_pulls_start(const char *run_dir);
/** The edge's master process, which the thread asks to reopen the file (-1: none). */
void berth_edge_pulls_edge(pid_t pid);
/** Manifest GETs the edge answered and berthd read from its lines since start (for /metrics) */
unsigned long berth_edge_pulls_read(void);
/** Stop moving the file and signalling the edge (before the edge is asked to stop: a quitting nginx does not
 * reopen its logs). */
void berth_edge_pulls_pause(void);
/** Stop, and read every line left (after the edge has stopped). */
void berth_edge_pulls_stop(void);
typedef struct {
    char who[256]; /* "" anonymous */
    char remote[64];
    char repo[512];
    char ref[160];
    char digest[72];
} berth_edge_pull_t;

/** One line as nginx writes it (without its newline) into `out`: 0, or -1 for a line that is not one. */
int berth_edge_pulls_parse(const char *line, size_t len, berth_edge_pull_t *out);

#endif
