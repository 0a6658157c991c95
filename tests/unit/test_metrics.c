/* Unit tests of server/metrics.c: histogram buckets (le is inclusive), the exposition text
 * (HELP/TYPE, escaped labels, cumulative buckets ending in +Inf, _sum, _count) and the HTTP
 * registry's grouping by route, method and status class; the families others register and push into. */
#include <stdlib.h>

#include <event2/buffer.h>

#include "tap.h"
#include "../../server/metrics.h"

/* b's text as a heap string; drains b. */
static char *text_of(struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	return s;
}

int main(void)
{
	static const double bounds[] = { 0.1, 1, 10 };
	struct metrics_hist hi;
	struct evbuffer *b = evbuffer_new();
	struct metrics *m;
	char *s;

	metrics_hist_init(&hi, bounds, 3);
	metrics_hist_observe(&hi, 0.05);
	metrics_hist_observe(&hi, 0.1);  /* on the bound: in that bucket */
	metrics_hist_observe(&hi, 0.5);
	metrics_hist_observe(&hi, 100);  /* overflow: +Inf only */
	TAP_INT_EQ(hi.counts[0], 2, "values <= first bound");
	TAP_INT_EQ(hi.counts[1], 1, "value in second bucket");
	TAP_INT_EQ(hi.counts[2], 0, "third bucket empty");
	TAP_INT_EQ(hi.counts[3], 1, "overflow counted");
	TAP_INT_EQ(hi.count, 4, "count");

	metrics_write_hist(b, "x_seconds", (const char *const[]){ "route", "/v1/jobs/{}", NULL }, &hi);
	s = text_of(b);
	TAP_STR_EQ(s,
		   "x_seconds_bucket{route=\"/v1/jobs/{}\",le=\"0.1\"} 2\n"
		   "x_seconds_bucket{route=\"/v1/jobs/{}\",le=\"1\"} 3\n"
		   "x_seconds_bucket{route=\"/v1/jobs/{}\",le=\"10\"} 3\n"
		   "x_seconds_bucket{route=\"/v1/jobs/{}\",le=\"+Inf\"} 4\n"
		   "x_seconds_sum{route=\"/v1/jobs/{}\"} 100.65\n"
		   "x_seconds_count{route=\"/v1/jobs/{}\"} 4\n",
		   "histogram text: cumulative buckets, +Inf, _sum, _count");
	free(s);
	metrics_hist_release(&hi);

	metrics_write_hist_cumulative(b, "w", NULL, bounds, (const uint64_t[]){ 0, 1, 1 }, 3, 2.5, 2);
	s = text_of(b);
	TAP_STR_EQ(s,
		   "w_bucket{le=\"0.1\"} 0\nw_bucket{le=\"1\"} 1\nw_bucket{le=\"10\"} 1\nw_bucket{le=\"+Inf\"} 2\n"
		   "w_sum 2.5\nw_count 2\n",
		   "cumulative histogram without labels");
	free(s);

	metrics_write_sample(b, "j", (const char *const[]){ "rung", "a\"b\\c\nd", "k", "v", NULL }, 3);
	s = text_of(b);
	TAP_STR_EQ(s, "j{rung=\"a\\\"b\\\\c\\nd\",k=\"v\"} 3\n", "label values escaped: quote, backslash, newline");
	free(s);
	metrics_write_sample(b, "g", NULL, 0.25);
	metrics_write_sample(b, "g", NULL, 12345678);
	s = text_of(b);
	TAP_STR_EQ(s, "g 0.25\ng 12345678\n", "numbers: fractions and integers");
	free(s);

	/* worker pools: both families list every pool the statement gives, so the alert can pair them */
	{
		json_t *pools = json_loads("{\"default\": {\"queued\": 2, \"gpus\": 8, \"borrowing_gpus\": 2}, "
					   "\"h200\": {\"queued\": 3, \"gpus\": 0, \"borrowing_gpus\": 0}, \"spot\": "
					   "{\"queued\": 0, \"gpus\": 4, \"borrowing_gpus\": 0}}", 0, NULL);
		metrics_write_pools(b, pools);
		s = text_of(b);
		TAP_OK(strstr(s, "# TYPE rung_pool_queued_jobs gauge\n") && strstr(s, "# TYPE rung_pool_gpus gauge\n"),
		       "pools: two gauges");
		TAP_OK(strstr(s, "rung_pool_queued_jobs{pool=\"default\"} 2\nrung_pool_queued_jobs{pool=\"h200\"} 3\n"
				 "rung_pool_queued_jobs{pool=\"spot\"} 0\n") != NULL, "pools: queued jobs per pool, 0 included");
		TAP_OK(strstr(s, "rung_pool_gpus{pool=\"default\"} 8\nrung_pool_gpus{pool=\"h200\"} 0\n"
				 "rung_pool_gpus{pool=\"spot\"} 4\n") != NULL,
		       "pools: GPUs per pool, a pool with jobs and no GPU at 0 (what RungPoolWithoutGpus reads)");
		TAP_OK(strstr(s, "# TYPE rung_pool_borrowing_gpus gauge\n") &&
		       strstr(s, "rung_pool_borrowing_gpus{pool=\"default\"} 2\nrung_pool_borrowing_gpus{pool=\"h200\"} 0\n"
				 "rung_pool_borrowing_gpus{pool=\"spot\"} 0\n") != NULL,
		       "pools: borrowers' GPUs per pool (migration 028), 0 included (RungPoolWithoutGpus adds them)");
		free(s);
		json_decref(pools);
		metrics_write_pools(b, NULL);
		s = text_of(b);
		TAP_OK(strstr(s, "# TYPE rung_pool_gpus gauge\n") && strstr(s, "# TYPE rung_pool_borrowing_gpus gauge\n") &&
		       !strstr(s, "{pool="), "pools: none, the heads alone");
		free(s);
	}

	/* tokens that expire: a sample each, labels escaped, negative once expired */
	{
		json_t *t = json_loads("[{\"id\": 7, \"name\": \"ci\\\"x\", \"role\": \"worker\", \"s\": -30}, "
				       "{\"id\": 9, \"name\": \"team-a\", \"role\": \"submitter\", \"s\": 604800}]", 0, NULL);
		metrics_write_token_expiry(b, t);
		s = text_of(b);
		TAP_OK(strstr(s, "# TYPE rung_token_expiry_seconds gauge\n") &&
		       strstr(s, "rung_token_expiry_seconds{id=\"7\",name=\"ci\\\"x\",role=\"worker\"} -30\n") &&
		       strstr(s, "rung_token_expiry_seconds{id=\"9\",name=\"team-a\",role=\"submitter\"} 604800\n"),
		       "token expiry: one sample per token, the name escaped, an expired one negative");
		free(s);
		json_decref(t);
		metrics_write_token_expiry(b, NULL);
		s = text_of(b);
		TAP_OK(strstr(s, "# TYPE rung_token_expiry_seconds gauge\n") && !strstr(s, "{id="), "token expiry: none, the head alone");
		free(s);
	}

	metrics_write_head(b, "rung_jobs", "gauge", "Jobs by state\\now.\nsecond line");
	s = text_of(b);
	TAP_STR_EQ(s, "# HELP rung_jobs Jobs by state\\\\now.\\nsecond line\n# TYPE rung_jobs gauge\n",
		   "HELP escapes backslash and newline; TYPE follows");
	free(s);

	m = metrics_new();
	metrics_http_observe(m, "GET", "/v1/jobs/{}", 200, 0.003);
	metrics_http_observe(m, "GET", "/v1/jobs/{}", 204, 0.2);
	metrics_http_observe(m, "GET", "/v1/jobs/{}", 404, 0.001);
	metrics_http_observe(m, "POST", "unmatched", 404, 0.001);
	metrics_write_http(m, b);
	s = text_of(b);
	TAP_OK(strstr(s, "# TYPE rung_http_request_duration_seconds histogram\n") != NULL, "http histogram typed");
	TAP_OK(strstr(s, "rung_http_request_duration_seconds_count{route=\"/v1/jobs/{}\",method=\"GET\",status=\"2xx\"} 2\n")
	       != NULL, "200 and 204 share the 2xx series");
	TAP_OK(strstr(s, "rung_http_request_duration_seconds_bucket{route=\"/v1/jobs/{}\",method=\"GET\",status=\"2xx\",le=\"0.005\"} 1\n")
	       != NULL, "fast request in the 5 ms bucket");
	TAP_OK(strstr(s, "rung_http_request_duration_seconds_count{route=\"/v1/jobs/{}\",method=\"GET\",status=\"4xx\"} 1\n")
	       != NULL, "4xx series apart");
	TAP_OK(strstr(s, "route=\"unmatched\",method=\"POST\",status=\"4xx\",le=\"+Inf\"} 1\n") != NULL,
	       "unmatched paths share one route label");
	free(s);

	/* families others register and push into, written in registration order */
	{
		static const char *const l0[] = { "scope", "job", NULL }, *const l1[] = { "scope", "worker", NULL };
		static const char *const *const labels[] = { l0, l1 };
		struct metrics_family *g = metrics_register(m, "x_waiters", "gauge", "Waiters.", 1, NULL);
		struct metrics_family *c = metrics_register(m, "x_checks_total", "counter", "Checks.", 2, labels);

		TAP_OK(g && c && g != c, "two families registered");
		TAP_OK(metrics_register(m, "x_checks_total", "counter", "Checks.", 2, labels) == c,
		       "registering a name again gives the same family");
		TAP_OK(metrics_register(m, "x_checks_total", "counter", "Checks.", 3, labels) == NULL,
		       "but not with another number of samples");
		metrics_set(g, 0, 3);
		metrics_set(g, 0, 2);
		metrics_add(c, 1, 1);
		metrics_add(c, 1, 2);
		metrics_add(c, 2, 5); /* no such sample: ignored */
		metrics_add(NULL, 0, 1);
		metrics_set(NULL, 0, 1);
		metrics_write_families(m, b);
		s = text_of(b);
		TAP_STR_EQ(s, "# HELP x_waiters Waiters.\n# TYPE x_waiters gauge\nx_waiters 2\n"
			      "# HELP x_checks_total Checks.\n# TYPE x_checks_total counter\n"
			      "x_checks_total{scope=\"job\"} 0\nx_checks_total{scope=\"worker\"} 3\n",
			   "a gauge holds what was set last, a counter sums what was added, by sample");
		free(s);
		TAP_OK(metrics_register(NULL, "x", "gauge", "X.", 1, NULL) == NULL, "no registry: NULL family");
	}
	metrics_free(m);
	metrics_free(NULL);
	metrics_http_observe(NULL, "GET", "/x", 200, 1);
	evbuffer_free(b);
	return TAP_DONE();
}
