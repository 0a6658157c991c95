/* What of a running attempt's trainer log rungd has not seen yet, cut into the chunks rung-worker
 * sends (POST /v1/attempts/{id}/log, server/api_logs.h). Reads the log file the runner writes
 * (runner.h) from a byte offset; owns nothing between calls, so the slot keeps the offset. */
#ifndef RUNG_WORKER_LOGSHIP_H
#define RUNG_WORKER_LOGSHIP_H

#include <stdbool.h>
#include <stddef.h>

#define LOGSHIP_CHUNK_BYTES (64 * 1024) /* bytes of the log read per chunk */

/* A chunk: bytes [from, to) of the log, as text (heap, valid UTF-8 without NUL). */
struct logship_chunk {
	long long from, to;
	char *text;
};

/* The next chunk of the file at PATH from byte FROM, reading at most MAX bytes. While the trainer
 * runs (FINAL false) the chunk ends at the last line end it holds: after the last '\n', or before
 * the last '\r' (a progress bar's redraw is sent once the next one starts), so an unfinished line
 * waits for the next chunk; a read of MAX bytes with no line end is cut before a UTF-8 character the
 * read cut short. FINAL (the trainer has exited): the same, but a read that reaches the end of the
 * log takes all of it. Returns 1 with *out filled (free out->text), 0 when there is nothing to send
 * yet, -1 when the file cannot be read (errno set). */
int logship_next(const char *path, long long from, size_t max, bool final, struct logship_chunk *out);

/* The text a chunk of raw log bytes RAW[0..LEN) is sent as (heap): a line a progress bar redrew in
 * place ("\rA\rB\rC") keeps only its last drawing ("\rC": the '\r' says it overwrites the line
 * before it), a "\r\n" line end becomes "\n", and bytes that are not UTF-8 (or NUL) become '?'.
 * Pure. */
char *logship_text(const char *raw, size_t len);

#endif
