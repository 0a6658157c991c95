/* Plain-text tables for rungctl's list commands: a header row and rows of cells, columns padded to
 * their widest cell (counted in UTF-8 characters), long cells cut with "...". Also the one rule for
 * turning a JSON value into a cell. Pure formatting, no I/O. */
#ifndef RUNG_TABLE_H
#define RUNG_TABLE_H

#include <stddef.h>
#include <jansson.h>

#define TABLE_MAX_CELL 60   /* characters kept per cell */

struct table;

/* A table with ncols columns titled by headers (copied). Free with table_free. */
struct table *table_new(size_t ncols, const char *const *headers);
void table_free(struct table *t);

/* Appends a row of ncols cells (copied; NULL prints as "-"). */
void table_add(struct table *t, const char *const *cells);

/* Number of rows added so far. */
size_t table_rows(const struct table *t);

/* Renders header and rows, columns separated by two spaces, no trailing blanks, each line ending in
 * "\n". Returns a heap string the caller frees. */
char *table_render(const struct table *t);

/* Text for one JSON value in a cell: strings as they are, integers in decimal, reals with %g,
 * true/false, "-" for null or a missing value (NULL), compact JSON for arrays and objects.
 * Returns a heap string the caller frees. */
char *table_cell(const json_t *v);

#endif
