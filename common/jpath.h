/* JSON paths in the dotted form rung uses everywhere ("config.process[0].train.batch_size"):
 * get, set and delete on jansson values. Keys are [A-Za-z0-9_-]+, indexes are [N]. Pure code. */
#ifndef RUNG_JPATH_H
#define RUNG_JPATH_H

#include <jansson.h>

/* Borrowed pointer to the value at path under root, or NULL when any part is missing or of the
 * wrong type, or the path is malformed. */
json_t *jpath_get(const json_t *root, const char *path);

/* Stores value (stolen, also on failure) at path, creating missing object members on the way
 * (array elements are never created). Returns 0, or -1 when the path is malformed or crosses a
 * non-container or an index out of range. */
int jpath_set(json_t *root, const char *path, json_t *value);

/* Removes the member or array element at path. Returns 0 when removed, -1 when absent. */
int jpath_del(json_t *root, const char *path);

/* Integer at path when it is a JSON integer (or a real with an integral value), else dflt. */
long long jpath_int(const json_t *root, const char *path, long long dflt);

/* Boolean at path when it is true/false, else dflt. */
int jpath_bool(const json_t *root, const char *path, int dflt);

/* Borrowed string at path, or dflt. */
const char *jpath_str(const json_t *root, const char *path, const char *dflt);

#endif
