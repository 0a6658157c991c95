/* Text tables for rungctl (see table.h). Cells are copied in; widths are computed at render time. */
#include "table.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

struct table {
	size_t ncols;
	size_t nrows;           /* rows, header included */
	char **cells;           /* nrows * ncols, owned */
};

/* Characters (not bytes) in a UTF-8 string. */
static size_t utf8_len(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		if ((*s & 0xC0) != 0x80)
			n++;
	return n;
}

/* Copy of s cut to TABLE_MAX_CELL characters, with newlines and tabs turned into spaces. */
static char *cell_copy(const char *s)
{
	if (!s)
		return xstrdup("-");
	size_t chars = 0, i;
	char *out = xmalloc(strlen(s) + 4);
	for (i = 0; s[i]; i++) {
		if ((s[i] & 0xC0) != 0x80 && ++chars > TABLE_MAX_CELL - 3 && utf8_len(s + i) > 3)
			break;
		out[i] = s[i] == '\n' || s[i] == '\t' || s[i] == '\r' ? ' ' : s[i];
	}
	if (s[i])
		memcpy(out + i, "...", 3), i += 3;
	out[i] = '\0';
	return out;
}

static void add_row(struct table *t, const char *const *cells)
{
	t->cells = xrealloc(t->cells, (t->nrows + 1) * t->ncols * sizeof(*t->cells));
	for (size_t c = 0; c < t->ncols; c++)
		t->cells[t->nrows * t->ncols + c] = cell_copy(cells[c]);
	t->nrows++;
}

struct table *table_new(size_t ncols, const char *const *headers)
{
	struct table *t = xcalloc(1, sizeof(*t));
	t->ncols = ncols;
	add_row(t, headers);
	return t;
}

void table_free(struct table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

void table_add(struct table *t, const char *const *cells)
{
	add_row(t, cells);
}

size_t table_rows(const struct table *t)
{
	return t->nrows - 1;
}

char *table_render(const struct table *t)
{
	size_t *w = xcalloc(t->ncols, sizeof(*w)), total = 1, r, c;
	for (r = 0; r < t->nrows; r++)
		for (c = 0; c < t->ncols; c++) {
			size_t l = utf8_len(t->cells[r * t->ncols + c]);
			if (l > w[c])
				w[c] = l;
			total += strlen(t->cells[r * t->ncols + c]) + w[c] + 3;
		}
	char *out = xmalloc(total + t->nrows), *o = out;
	for (r = 0; r < t->nrows; r++) {
		char *line = o;
		for (c = 0; c < t->ncols; c++) {
			const char *cell = t->cells[r * t->ncols + c];
			size_t len = strlen(cell);
			memcpy(o, cell, len);
			o += len;
			if (c + 1 < t->ncols) {
				size_t pad = w[c] - utf8_len(cell) + 2;
				memset(o, ' ', pad);
				o += pad;
			}
		}
		while (o > line && o[-1] == ' ')
			o--;
		*o++ = '\n';
	}
	*o = '\0';
	free(w);
	return out;
}

char *table_cell(const json_t *v)
{
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_STRING:
		return xstrdup(json_string_value(v));
	case JSON_INTEGER:
		return xasprintf("%lld", (long long)json_integer_value(v));
	case JSON_REAL:
		return xasprintf("%g", json_real_value(v));
	case JSON_TRUE:
		return xstrdup("true");
	case JSON_FALSE:
		return xstrdup("false");
	case JSON_NULL:
		return xstrdup("-");
	case JSON_OBJECT:
	case JSON_ARRAY: {
		char *s = json_dumps(v, JSON_COMPACT);
		char *out = xstrdup(s ? s : "?");
		free(s);
		return out;
	}
	}
	abort();
}
