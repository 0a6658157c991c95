/* The route table of rungd: every route's handler (api_*, web, metrics) with who may call it, and
 * the hooks that plug auth.c and metrics.c into http.c's request path. The one module that knows
 * both the router and every handler, so that http.c knows neither. */
#ifndef RUNG_ROUTES_H
#define RUNG_ROUTES_H

#include "auth.h"

struct app;

/* Installs the route table and the hooks (auth's guard, body check and release; metrics' observer
 * of each reply) with http_setup. */
void routes_setup(struct app *app);

/* The access rule of the route METHOD PATH: its AUTH_* roles (0 = any valid token) and scope.
 * Returns 0, or -1 when no route matches (for tests and docs of who may do what). */
int routes_access(const char *method, const char *path, unsigned *roles, enum auth_scope *scope);

#endif
