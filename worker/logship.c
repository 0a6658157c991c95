/* Chunks of a trainer log for rungd (logship.h): where a chunk may end, and what of a progress
 * bar's redraws is worth sending. */
#include "logship.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

char *logship_text(const char *raw, size_t len)
{
	char *buf = xmalloc(len + 1), *out;
	size_t o = 0, ls = 0;

	while (ls < len) {
		const char *nl = memchr(raw + ls, '\n', len - ls);
		size_t le = nl ? (size_t)(nl - raw) : len, ce = le, p = le;
		while (ce > ls && raw[ce - 1] == '\r') /* "\r\n" ends a line as "\n" does */
			ce--;
		for (size_t i = ce; i > ls; i--)
			if (raw[i - 1] == '\r') {
				p = i - 1;
				break;
			}
		if (p < ce) { /* redrawn in place: its last drawing, marked as one */
			buf[o++] = '\r';
			memcpy(buf + o, raw + p + 1, ce - p - 1);
			o += ce - p - 1;
		} else {
			memcpy(buf + o, raw + ls, ce - ls);
			o += ce - ls;
		}
		if (nl)
			buf[o++] = '\n';
		ls = le + (nl ? 1 : 0);
	}
	out = util_utf8_sanitize(buf, o, o);
	free(buf);
	return out;
}

/* How many of BUF's N bytes end on a whole UTF-8 character: N, or where a sequence starts that the
 * read cut short (it goes with the next chunk). */
static size_t utf8_whole(const char *buf, size_t n)
{
	size_t i = n;

	while (i > 0 && n - i < 3 && ((unsigned char)buf[i - 1] & 0xC0) == 0x80)
		i--; /* back over continuation bytes to the sequence's lead byte */
	if (i > 0) {
		unsigned char lead = (unsigned char)buf[i - 1];
		size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
		if (lead >= 0xC0 && n - (i - 1) < len)
			return i - 1 > 0 ? i - 1 : n; /* a sequence alone in a whole chunk cannot be whole: as it is */
	}
	return n;
}

int logship_next(const char *path, long long from, size_t max, bool final, struct logship_chunk *out)
{
	char *buf;
	ssize_t n;
	size_t cut = 0;
	int fd, saved;

	memset(out, 0, sizeof *out);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1; /* the runner has not created it yet */
	buf = xmalloc(max ? max : 1);
	do
		n = pread(fd, buf, max, (off_t)from);
	while (n < 0 && errno == EINTR);
	saved = errno;
	close(fd);
	if (n <= 0) {
		free(buf);
		errno = saved;
		return n < 0 ? -1 : 0;
	}
	if (final && (size_t)n < max) {
		cut = (size_t)n; /* the end of the log: all of it */
	} else {
		for (size_t i = (size_t)n; i > 0; i--)
			if (buf[i - 1] == '\n') {
				cut = i;
				break;
			} else if (buf[i - 1] == '\r' && i - 1 > 0) { /* the redraw starting here goes next time */
				cut = i - 1;
				break;
			}
		if (cut == 0 && (size_t)n == max) /* a line longer than a chunk: cut, but not through a character */
			cut = utf8_whole(buf, (size_t)n);
	}
	if (cut == 0) {
		free(buf);
		return 0;
	}
	out->from = from;
	out->to = from + (long long)cut;
	out->text = logship_text(buf, cut);
	free(buf);
	return 1;
}
