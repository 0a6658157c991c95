/* Finishes kept on disk until rungd acknowledges them: WORK/spool/<attempt_id>.json holding
 * {"attempt_id", "token", "facts"}, written atomically (temp file, fsync, rename, fsync of the
 * directory) before the finish is sent, removed after a 2xx or 409. Owns only those files. */
#ifndef RUNG_WORKER_SPOOL_H
#define RUNG_WORKER_SPOOL_H

#include <jansson.h>
#include <stddef.h>

/* mkdir -p PATH (mode 0755). Returns 0, or -1 with *err (heap). */
int spool_mkdir_p(const char *path, char **err);

/* Atomically writes DOC (borrowed) as DIR/ID.json. ID must be a safe name (spool_safe_id).
 * Returns 0 once the file and its directory entry are on disk, or -1 with *err (heap). */
int spool_put(const char *dir, const char *id, const json_t *doc, char **err);

/* Reads DIR/ID.json; a new reference, or NULL (logged) when missing or unparsable. */
json_t *spool_get(const char *dir, const char *id);

/* Removes DIR/ID.json; a missing file is not an error. */
void spool_remove(const char *dir, const char *id);

/* The ids of the DIR/ID.json files, sorted; a new NULL-terminated array of heap strings (free with
 * spool_list_free); an empty list when DIR is missing. Temp files are not listed. */
char **spool_list(const char *dir);
void spool_list_free(char **ids);

/* A copy of ID (heap) fit for a file name: every byte outside [A-Za-z0-9_-] becomes '_'. */
char *spool_safe_id(const char *id);

#endif
